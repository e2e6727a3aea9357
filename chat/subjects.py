"""The closed list of what a fact can be about: its label, and whether a newer fact supersedes an older one."""

from dataclasses import dataclass

# The thread an owner's facts are stored in (`chat.writer.facts`): one per owner, made with the first fact,
# never listed among the conversations (the profile page shows its facts). Its source is no import format's
# ("dellm" is DeLLM's own export's), so no import or purge of an import takes it for an imported conversation.
FACTS_SOURCE = "memory"
FACTS_SOURCE_ID = "facts"
FACTS_TITLE = "What DeLLM knows about you"


@dataclass(frozen=True)
class Subject:
    key: str
    # Shown on the profile page and written at the head of the fact's text, so
    # that a question in other words ("near home") still finds "I live in Lisbon".
    label: str
    # One value at a time (a home city, an employer): a newer fact supersedes the older.
    single: bool


SUBJECTS = {
    s.key: s
    for s in (
        Subject("name", "Name", single=True),
        Subject("home", "Home city", single=True),
        Subject("origin", "Hometown", single=True),
        Subject("work", "Work and job", single=True),
        Subject("study", "Studies", single=True),
        Subject("age", "Age and birthday", single=True),
        Subject("partner", "Partner", single=True),
        Subject("family", "Family and friends", single=False),
        Subject("pet", "Pets", single=False),
        Subject("health", "Diet and health", single=False),
        Subject("likes", "Likes and hobbies", single=False),
        Subject("dislikes", "Dislikes", single=False),
        Subject("plans", "Plans", single=False),
        Subject("events", "Things you did", single=False),
        Subject("routine", "Daily life", single=False),
    )
}
SUBJECT_KEYS = tuple(SUBJECTS)


def fact_text(subject: str, statement: str) -> str:
    """A fact's stored words: its subject's label, then the statement ("Home city: I live in Lisbon.")."""
    return f"{SUBJECTS[subject].label}: {statement}"


_LABELS = {subject.label: subject.key for subject in SUBJECTS.values()}


def fact_parts(text: str) -> tuple[str | None, str]:
    """A fact's subject key and its statement, from its stored words; (None, text) for words that are not a fact's."""
    label, colon, statement = text.partition(": ")
    if colon and label in _LABELS:
        return _LABELS[label], statement
    return None, text
