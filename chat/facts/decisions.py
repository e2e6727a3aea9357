"""What the user decides about a fact: approve it, correct it, or decline it (which `provenance` carries out).

A correction is the user's own statement: a user message in the facts
thread (memory like any message, retrieved, in no conversation), and a fact
drawn from it with the corrected fact's subject, said now, so it supersedes
a single-valued subject's older facts. Declining records, ids only, that this
fact's subject is never drawn again from its sources (`FactDecline`); the
fact itself is removed by a deletion, with its preview and receipt
(`provenance.deletions.facts.fact_decline`).
"""

from collections.abc import Iterable
from datetime import datetime

from django.utils import timezone

from chat.models import Fact, FactDecline, Message
from chat.retrieval.facts import fact_sources
from chat.subjects import SUBJECTS, fact_text
from chat.writer import message_store
from chat.writer.facts import fact_store, facts_thread
from chat.writer.vectors import messages_index_embed
from core.errors import NotFound, ValidationFailed

# A correction is one statement, not a document.
CORRECTION_MAX_CHARS = 300


def fact_get(*, owner_id: int, fact_id: int, live: bool = True) -> tuple[Message, Fact]:
    """The owner's fact and its row; NotFound for anything else (another owner's, a message, a removed fact)."""
    row = Fact.objects.filter(owner_id=owner_id, message_id=fact_id).first()
    statuses = Message.LIVE if live else (*Message.LIVE, *Message.REMOVED)
    message = (
        Message.objects.filter(owner_id=owner_id, pk=fact_id, role=Message.Role.FACT, status__in=statuses).first()
        if row is not None
        else None
    )
    if message is None or row is None:
        raise NotFound(f"No fact with id {fact_id}.")
    return message, row


def fact_approve(*, owner_id: int, fact_id: int) -> Fact:
    _, row = fact_get(owner_id=owner_id, fact_id=fact_id)
    Fact.objects.filter(pk=row.pk).update(decision=Fact.Decision.APPROVED)
    row.decision = Fact.Decision.APPROVED
    return row


def fact_correct(*, owner_id: int, fact_id: int, text: str) -> Message:
    """Store the user's correction of a fact as their statement, and the fact drawn from it; the new fact."""
    _, row = fact_get(owner_id=owner_id, fact_id=fact_id)
    if not isinstance(text, str) or not " ".join(text.split()):
        raise ValidationFailed("The correction is empty.", fields={"text": "empty"})
    statement = " ".join(text.split())
    if len(statement) > CORRECTION_MAX_CHARS:
        raise ValidationFailed(
            f"A correction has at most {CORRECTION_MAX_CHARS} characters.", fields={"text": "too long"}
        )
    thread = facts_thread(owner_id=owner_id)
    said = message_store(owner_id=owner_id, thread_id=thread.pk, role=Message.Role.USER, content=statement)
    fact, _ = fact_store(
        owner_id=owner_id,
        subject=row.subject,
        text=fact_text(row.subject, statement if statement[-1] in ".!" else statement + "."),
        sources=[said.pk],
        said_at=timezone.now(),
        extractor="user",
        # The user's own statement is a fact of its own, even in the same words as the one corrected.
        merge=False,
    )
    new_id = fact.pk if isinstance(fact, Message) else fact
    Fact.objects.filter(owner_id=owner_id, message_id=new_id).update(decision=Fact.Decision.APPROVED)
    messages_index_embed(owner_id=owner_id, ids=[said.pk, new_id])
    return Message.objects.get(owner_id=owner_id, pk=new_id)


def corrected_supersedes(subject: str) -> bool:
    """Whether a correction supersedes the fact by itself (a single-valued subject) or the fact must go too."""
    return SUBJECTS[subject].single


def declines_record(*, owner_id: int, fact_id: int) -> list[int]:
    """Never draw this fact's subject again from its sources; the ids of those sources."""
    _, row = fact_get(owner_id=owner_id, fact_id=fact_id)
    sources = fact_sources(owner_id=owner_id, ids=[fact_id]).get(fact_id, [])
    FactDecline.objects.bulk_create(
        [FactDecline(owner_id=owner_id, source_id=pk, subject=row.subject) for pk in sources], ignore_conflicts=True
    )
    return sources


def facts_declined(*, owner_id: int, ids: Iterable[int], since: datetime) -> list[int]:
    """The facts among `ids` whose subject the user declined, after `since`, from one of their live sources.

    Declining a fact records its subject against its sources; an older fact of the same statement (one a
    re-derivation replaced) carries those sources too, and is declined with them. Ascending ids.
    """
    subjects = dict(
        Fact.objects.filter(owner_id=owner_id, message_id__in=sorted(set(ids))).values_list("message_id", "subject")
    )
    sources = fact_sources(owner_id=owner_id, ids=subjects)
    declined = set(
        FactDecline.objects.filter(
            owner_id=owner_id,
            source_id__in=sorted({pk for found in sources.values() for pk in found}),
            created_at__gt=since,
        ).values_list("source_id", "subject")
    )
    return sorted(fact for fact, found in sources.items() if any((pk, subjects[fact]) in declined for pk in found))
