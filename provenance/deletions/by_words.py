"""Selections decided by words, not by a similarity threshold: a name as a whole word, a subject named in other
words, and the polarity of a statement.

- `words_select`: the messages holding a phrase as whole words ("Ana" is not
  in "Anastasia"), however cased; each redacts the clause that holds it.
- `subject_select`: a request about a subject ("forget my employer", "forget
  where I live") takes the subject's facts, the messages they were drawn
  from, and the user's statements that use the subject's words ("I quit my
  old job and joined a robotics lab" for `work`); each statement redacts the
  clause with those words, so "I'm married to Sam and I work at Initech"
  keeps the marriage.
- `negated`: whether a statement is negated ("I don't eat pork"). A semantic
  selection by a first-person statement keeps only the matches of the same
  polarity: forgetting that I don't eat pork keeps "I eat pork on holidays".

All of it linear: literal phrases are escaped, the patterns have no nested
quantifiers, and the database narrows the candidates before any is read.
"""

import re
from dataclasses import dataclass, field

from django.db.models import Q

from chat.models import Message
from chat.retrieval.facts import fact_sources, subject_facts
from core.types import User

# A verb negated: "don't", "never", "no longer", "do not"; not a "not" that corrects a word ("Paris, not Lyon").
_NEGATION = re.compile(
    r"n't\b|\b(?:never|no longer|cannot)\b"
    r"|\b(?:am|is|are|was|were|do|does|did|have|has|had|will|would|can|could|should|must|i)\s+not\b",
    re.I,
)
_FIRST_PERSON = re.compile(r"^\s*(?:that\s+)?(?:i|i'm|i am|i've|i have|i was|i'd|i'll|my|we|we're|our)\b", re.I)
_SPEAKS = re.compile(r"\b(?:i|i'm|i've|i'd|me|my|we|our|us)\b", re.I)


def _apostrophes(text: str) -> str:
    return text.replace("’", "'").replace("ʼ", "'")


def negated(text: str) -> bool:
    return _NEGATION.search(_apostrophes(text)) is not None


def is_statement(text: str) -> bool:
    """A first-person statement ("I don't eat pork", "my dog is called Rex"), not a topic ("pork")."""
    return _FIRST_PERSON.match(_apostrophes(text)) is not None


# The words a user's statement about a subject uses, and the phrases that name the subject in a request. A
# request names a subject when, without its possessives, it is one of the phrases.
SUBJECT_WORDS = {
    "work": "work worked working job jobs employer employed hired joined company career occupation profession",
    "home": "live lived living home flat apartment house moved reside",
    "origin": "grew hometown born",
    "study": "study studies studied studying university school college degree",
    "partner": "married partner husband wife boyfriend girlfriend spouse engaged dating",
    "health": "eat eating ate diet vegan vegetarian allergic allergy allergies food",
    "pet": "dog dogs cat cats pet pets puppy kitten",
}
SUBJECT_PHRASES = {
    "work": (
        "where i work",
        "where i worked",
        "my employer",
        "my job",
        "my work",
        "my company",
        "my career",
        "what i do for work",
        "what i do for a living",
        "my workplace",
        "my occupation",
        "my profession",
    ),
    "home": (
        "where i live",
        "my home",
        "my address",
        "my city",
        "where i'm living",
        "where i am living",
        "my flat",
        "my apartment",
        "my house",
        "where i stay",
    ),
    "origin": ("where i'm from", "where i am from", "where i come from", "my hometown", "where i grew up"),
    "study": ("where i study", "where i studied", "my studies", "my school", "my university", "my degree"),
    "partner": (
        "my partner",
        "who i'm married to",
        "who i am married to",
        "my husband",
        "my wife",
        "my boyfriend",
        "my girlfriend",
        "my spouse",
        "my marriage",
        "my relationship",
    ),
    "health": (
        "my diet",
        "what i eat",
        "what i don't eat",
        "my allergies",
        "my allergy",
        "my food",
        "what i can't eat",
        "my eating habits",
    ),
    "pet": ("my pet", "my pets", "my dog", "my cat", "my dogs", "my cats"),
}
_LEADING = re.compile(r"^(?:(?:everything|anything|all|what you know)\s+(?:about\s+)?|about\s+|the\s+)+", re.I)


def topic_subject(topic: str) -> str | None:
    """The subject a request's topic names as a whole ("my employer", "where I live"), else None."""
    core = _LEADING.sub("", " ".join(_apostrophes(topic).casefold().split())).strip(" .!?")
    return next((subject for subject, phrases in SUBJECT_PHRASES.items() if core in phrases), None)


@dataclass
class WordsMatch:
    matched: list[int] = field(default_factory=list)
    # {message id: (Matcher kind, text)}: what a redaction of that message removes.
    phrases: dict[int, tuple[str, str]] = field(default_factory=dict)


def _whole(words: str) -> re.Pattern[str]:
    return re.compile(r"(?<!\w)" + r"\s+".join(re.escape(w) for w in words.split()) + r"(?!\w)", re.I)


def words_select(*, owner: User, phrase: str, statuses: list[str]) -> WordsMatch:
    """The owner's messages in `statuses` holding `phrase` as whole words."""
    found = WordsMatch()
    pattern = _whole(phrase)
    # Never a system prompt: selected by its exact words or its id only (its blast radius is its whole thread).
    candidates = Message.objects.filter(owner=owner, status__in=statuses, content__icontains=phrase.split()[0]).exclude(
        role=Message.Role.SYSTEM
    )
    for pk, content in candidates.values_list("pk", "content").iterator():
        if pattern.search(content):
            found.matched.append(pk)
            found.phrases[pk] = ("exact", phrase)
    found.matched.sort()
    return found


def subject_select(*, owner: User, subject: str, statuses: list[str]) -> WordsMatch:
    """The subject's live facts, their sources, and the user's statements that use the subject's words."""
    found = WordsMatch()
    facts = [fact.id for fact in subject_facts(owner_id=owner.pk, subjects=[subject]).get(subject, [])]
    sources = {pk for ids in fact_sources(owner_id=owner.pk, ids=facts).values() for pk in ids}
    words = SUBJECT_WORDS[subject].split()
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(re.escape(w) for w in words) + r")(?!\w)", re.I)
    said = Message.objects.filter(owner=owner, status__in=statuses, role=Message.Role.USER).filter(
        Q(content__iregex=r"\m(?:" + "|".join(words) + r")\M") | Q(pk__in=sorted(sources))
    )
    for pk, content in said.values_list("pk", "content").iterator():
        # The user's own statement in the subject's words ("I work at ..."), not any message using them.
        used = {match.casefold() for match in pattern.findall(content)} if _SPEAKS.search(content) else set()
        if used or pk in sources:
            found.matched.append(pk)
            found.phrases[pk] = ("semantic", " ".join(sorted(used)) or subject)
    found.matched = sorted({*found.matched, *facts})
    return found
