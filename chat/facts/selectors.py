"""Reading facts for the API and the profile page: a page of them, each with its subject, state and sources."""

from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import F, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce

from chat.facts.extract import extractor, facts_pending
from chat.models import INDEX_FIELDS, Fact, FactCursor, Message
from chat.retrieval.facts import fact_sources, subject_facts, superseded_by
from chat.subjects import SUBJECTS
from core.errors import ValidationFailed

STATES = ("current", "superseded")


@dataclass
class FactSource:
    id: int
    thread_id: int
    seq: int
    said_at: datetime


@dataclass
class FactView:
    """A live fact as shown: its message, subject, whether a newer fact supersedes it, and its live sources."""

    message: Message
    subject: str
    decision: str
    extractor: str
    superseded_by: int | None
    sources: list[FactSource] = field(default_factory=list)
    # Filled for one fact's detail: the other live facts of its subject, newest said first.
    history: list["FactView"] = field(default_factory=list)

    @property
    def state(self) -> str:
        return "superseded" if self.superseded_by is not None else "current"

    @property
    def said_at(self) -> datetime:
        """When its newest live source was said (what orders facts and decides which one is current)."""
        return max((source.said_at for source in self.sources), default=self.message.said_at)


def _superseded(owner_id: int) -> dict[int, int]:
    singles = [key for key, subject in SUBJECTS.items() if subject.single]
    return superseded_by(subject_facts(owner_id=owner_id, subjects=singles))


def fact_list(*, owner_id: int, subject: str | None = None, state: str | None = None) -> QuerySet[Message]:
    """The owner's live facts, by subject (the closed list's order) then newest said first; filters checked."""
    if subject is not None and subject not in SUBJECTS:
        raise ValidationFailed(
            f"Unknown subject {subject!r}; use one of {', '.join(SUBJECTS)}.", fields={"subject": "unknown"}
        )
    if state is not None and state not in STATES:
        raise ValidationFailed("state is current or superseded.", fields={"state": "unknown"})
    # By its unique message id alone: with the owner too, a planner whose statistics lag behind a fresh
    # import read the owner's whole index once per fact (a second for 5,669 facts).
    rows = Fact.objects.filter(message_id=OuterRef("pk"))
    facts = (
        Message.objects.filter(owner_id=owner_id, role=Message.Role.FACT, status__in=Message.LIVE)
        .defer(*INDEX_FIELDS)
        .annotate(subject=Subquery(rows.values("subject")[:1]), said=Coalesce("source_created_at", "created_at"))
    )
    if subject is not None:
        facts = facts.filter(subject=subject)
    if state is not None:
        older = sorted(_superseded(owner_id))
        facts = facts.filter(pk__in=older) if state == "superseded" else facts.exclude(pk__in=older)
    return facts.order_by("subject", F("said").desc(), "-seq")


def facts_describe(*, owner_id: int, facts: list[Message], newer: dict[int, int] | None = None) -> list[FactView]:
    """`FactView`s of these facts, in their order: a few queries for the whole page.

    `newer`: {fact id: the fact superseding it} of the facts' subjects, when the caller read it already.
    """
    ids = [fact.pk for fact in facts]
    rows = {row.message_id: row for row in Fact.objects.filter(owner_id=owner_id, message_id__in=ids)}
    if newer is None:
        singles = {row.subject for row in rows.values() if row.subject in SUBJECTS and SUBJECTS[row.subject].single}
        newer = superseded_by(subject_facts(owner_id=owner_id, subjects=singles))
    sources = fact_sources(owner_id=owner_id, ids=ids)
    said = {
        pk: FactSource(id=pk, thread_id=thread, seq=seq, said_at=source or created)
        for pk, thread, seq, source, created in Message.objects.filter(
            owner_id=owner_id, pk__in=sorted({pk for found in sources.values() for pk in found})
        ).values_list("pk", "thread_id", "seq", "source_created_at", "created_at")
    }
    return [
        FactView(
            message=fact,
            subject=rows[fact.pk].subject,
            decision=rows[fact.pk].decision,
            extractor=rows[fact.pk].extractor,
            superseded_by=newer.get(fact.pk),
            sources=[said[pk] for pk in sources.get(fact.pk, []) if pk in said],
        )
        for fact in facts
        if fact.pk in rows
    ]


# A fact's detail lists at most this many others of its subject (`GET /api/facts/?subject=` pages them all).
HISTORY_LISTED = 20


def fact_detail(*, owner_id: int, fact: Message, subject: str) -> FactView:
    """One fact with its history: the other live facts of its subject, newest said first, HISTORY_LISTED at most."""
    by_subject = subject_facts(owner_id=owner_id, subjects=[subject])
    newer = superseded_by(by_subject)
    others = [f.id for f in by_subject.get(subject, []) if f.id != fact.pk][:HISTORY_LISTED]
    rows = Message.objects.filter(owner_id=owner_id, pk__in=others).defer(*INDEX_FIELDS).in_bulk()
    [view] = facts_describe(owner_id=owner_id, facts=[fact], newer=newer)
    view.history = facts_describe(owner_id=owner_id, facts=[rows[pk] for pk in others if pk in rows], newer=newer)
    return view


def facts_progress(*, owner_id: int) -> dict[str, object]:
    """How far extraction is: user messages waiting, and the ids of those whose extraction failed."""
    failed = FactCursor.objects.filter(owner_id=owner_id).values_list("failed", flat=True).first() or []
    return {"pending": facts_pending(owner_id=owner_id), "failed": list(failed), "extractor": extractor()}
