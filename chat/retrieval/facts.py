"""Facts in a context: the current fact of a subject in place of a superseded one, standing for its sources.

Supersession is computed from what is live, never stored: of a single-valued
subject (`chat.subjects`: a home city, an employer) the current fact is the
one said last (as new as its newest live source), and every older live fact
of it is superseded by that one. So forgetting the newer statement reinstates
the older with nothing to rewrite, and undoing that deletion supersedes it
again. A turn's context (`facts_choose`) takes the facts retrieval found: a
superseded one gives way to its subject's current fact, each names its
sources (`ContextItem.sources`) and stands for them: with
DELLM_FACTS_CONTEXT=replace it takes the place of the first of them and the
others leave; with `beside` it goes just before the first and they stay;
with `off` no fact is used.
"""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime

from django.conf import settings
from django.db import connection

from chat.llm import ContextItem
from chat.models import LIVE_STATUSES, ContextEdge, Fact, Message
from chat.subjects import SUBJECTS

FACT = str(Message.Role.FACT)
FACT_SIGNAL = str(ContextEdge.Signal.FACT)

_MESSAGES = Message._meta.db_table
_FACTS = Fact._meta.db_table
_EDGES = ContextEdge._meta.db_table

# Every live fact of the owner's subjects %(subjects)s, newest said first. A fact is as new as the newest
# of its live sources (said again later, it is newer; its newest source removed, older), never its own row's
# date: one join of the facts, their `fact` edges and their live sources, grouped (hash joins over the owner's
# partitions, not a look-up per fact: 10,000 facts of one subject in tens of milliseconds).
_SUBJECT_FACTS_SQL = f"""
SELECT f.subject, m.id, m.seq, max(coalesce(s.source_created_at, s.created_at)) AS said_at
FROM {_FACTS} f
JOIN {_MESSAGES} m ON m.owner_id = f.owner_id AND m.id = f.message_id
JOIN {_EDGES} e ON e.owner_id = m.owner_id AND e.target_id = m.id AND e.signal = %(fact)s
JOIN {_MESSAGES} s ON s.owner_id = e.owner_id AND s.id = e.source_id AND s.status = ANY(%(live)s)
WHERE f.owner_id = %(owner)s AND f.subject = ANY(%(subjects)s) AND m.owner_id = %(owner)s
  AND e.owner_id = %(owner)s AND s.owner_id = %(owner)s AND m.status = ANY(%(live)s)
GROUP BY f.subject, m.id, m.seq
ORDER BY f.subject, said_at DESC, m.seq DESC
"""

# The live sources of facts %(ids)s (both ends name the owner: one partition each).
_SOURCES_SQL = f"""
SELECT e.target_id, e.source_id FROM {_EDGES} e
JOIN {_MESSAGES} s ON s.owner_id = e.owner_id AND s.id = e.source_id
WHERE e.owner_id = %(owner)s AND e.target_id = ANY(%(ids)s) AND e.signal = %(fact)s AND s.status = ANY(%(live)s)
ORDER BY e.target_id, e.source_id
"""


@dataclass(frozen=True)
class LiveFact:
    id: int
    seq: int
    subject: str
    said_at: datetime


def subject_facts(*, owner_id: int, subjects: Iterable[str]) -> dict[str, list[LiveFact]]:
    """The live facts of these subjects, newest said first: the head of a single-valued subject's list is current."""
    wanted = sorted(set(subjects))
    if not wanted:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            _SUBJECT_FACTS_SQL, {"owner": owner_id, "subjects": wanted, "live": LIVE_STATUSES, "fact": FACT_SIGNAL}
        )
        rows = cursor.fetchall()
    facts: dict[str, list[LiveFact]] = defaultdict(list)
    for subject, pk, seq, said_at in rows:
        facts[subject].append(LiveFact(id=pk, seq=seq, subject=subject, said_at=said_at))
    return dict(facts)


def superseded_by(facts: dict[str, list[LiveFact]]) -> dict[int, int]:
    """{fact id: the id of the current fact that supersedes it} over `subject_facts`' answer."""
    return {
        older.id: newest[0].id for subject, newest in facts.items() if SUBJECTS[subject].single for older in newest[1:]
    }


def fact_sources(*, owner_id: int, ids: Iterable[int]) -> dict[int, list[int]]:
    """{fact id: the live messages it was drawn from, ascending}."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(_SOURCES_SQL, {"owner": owner_id, "ids": wanted, "live": LIVE_STATUSES, "fact": FACT_SIGNAL})
        rows = cursor.fetchall()
    found: dict[int, list[int]] = defaultdict(list)
    for target, source in rows:
        found[target].append(source)
    return dict(found)


# A context with facts is chosen from this many times k retrieved items (see `chat.retrieval.context`).
FACTS_WIDTH = 2


def facts_held(*, owner_id: int) -> bool:
    """Whether the owner has facts that a context may use (DELLM_FACTS_CONTEXT not `off`); one indexed read."""
    return settings.DELLM_FACTS_CONTEXT != "off" and Fact.objects.filter(owner_id=owner_id).exists()


def facts_choose(*, owner_id: int, items: list[ContextItem]) -> list[ContextItem]:
    """The context with its facts settled (see the module's docstring); unchanged when it holds none."""
    if not any(item.role == FACT for item in items):
        return items
    mode = settings.DELLM_FACTS_CONTEXT
    if mode == "off":
        return [item for item in items if item.role != FACT]
    found = [item for item in items if item.role == FACT]
    subjects = dict(
        Fact.objects.filter(owner_id=owner_id, message_id__in=[item.id for item in found]).values_list(
            "message_id", "subject"
        )
    )
    # Only a single-valued subject has a current fact to put in place of an older one.
    singles = [subject for subject in subjects.values() if subject in SUBJECTS and SUBJECTS[subject].single]
    by_subject = subject_facts(owner_id=owner_id, subjects=singles)
    current = {facts[0].id: facts[0] for facts in by_subject.values()}
    newer = superseded_by(by_subject)
    heads = {newer[item.id] for item in found if item.id in newer}
    words = dict(Message.objects.filter(owner_id=owner_id, pk__in=heads).values_list("pk", "content"))
    # Each fact where it was found (a superseded one's place goes to its subject's current fact), once.
    settled: dict[int, ContextItem] = {}
    for position, item in enumerate(items):
        if item.role != FACT:
            continue
        if item.id in newer:
            head = current[newer[item.id]]
            item = replace(item, id=head.id, seq=head.seq, content=words[head.id], said_at=head.said_at)
        if all(other.id != item.id for other in settled.values()):
            settled[position] = item
    sources = fact_sources(owner_id=owner_id, ids=[item.id for item in settled.values()])
    settled = {position: replace(item, sources=tuple(sources.get(item.id, ()))) for position, item in settled.items()}
    place = {item.id: position for position, item in enumerate(items) if item.role != FACT}
    stood_for = {pk for item in settled.values() for pk in item.sources} if mode == "replace" else set()
    # A fact stands for its sources: it goes just before the first of them in the context, if that is earlier.
    ranked = [
        (min([position, *(place[pk] for pk in item.sources if pk in place)]) - 0.5, item)
        for position, item in settled.items()
    ]
    ranked += [
        (position, item) for position, item in enumerate(items) if item.role != FACT and item.id not in stood_for
    ]
    return [item for _, item in sorted(ranked, key=lambda pair: pair[0])]
