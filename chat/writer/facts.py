"""Storing facts (chat/facts/): a `fact` message in the owner's facts thread, a `fact` edge from each source.

Through `message_store` and `edges_add`, so the writer's rule holds: a fact is stored only while every
message it is drawn from is live, under the owner's lock. The same statement drawn again from another
message is the same fact with one more source (an edge), not a copy: forgetting one of the two then
re-derives it from the other (chat/facts/rederive.py).
"""

from collections.abc import Sequence
from datetime import datetime

from django.db import transaction

from chat.models import ContextEdge, Fact, Message, Thread
from chat.retrieval.facts import subject_facts
from chat.subjects import FACTS_SOURCE, FACTS_SOURCE_ID, FACTS_TITLE, SUBJECTS
from chat.writer.messages import Source, edges_add, message_store
from core.db.locks import owner_lock


def facts_thread(*, owner_id: int) -> Thread:
    """The owner's facts thread, created the first time (its source marks it, like the agent notes')."""
    thread, _ = Thread.objects.get_or_create(
        owner_id=owner_id, source=FACTS_SOURCE, source_id=FACTS_SOURCE_ID, defaults={"title": FACTS_TITLE}
    )
    return thread


def _same_current(*, owner_id: int, thread_id: int, subject: str, text: str) -> int | None:
    """The live fact of `subject` that says `text` and that no newer fact supersedes, if there is one."""
    same = Message.objects.filter(
        owner_id=owner_id, thread_id=thread_id, role=Message.Role.FACT, status__in=Message.LIVE, content__iexact=text
    ).values("pk")
    ids = set(
        Fact.objects.filter(owner_id=owner_id, subject=subject, message_id__in=same).values_list(
            "message_id", flat=True
        )
    )
    if not ids or not SUBJECTS[subject].single:
        return min(ids, default=None)
    newest = subject_facts(owner_id=owner_id, subjects=[subject]).get(subject, [])
    return newest[0].id if newest and newest[0].id in ids else None


def fact_store(
    *,
    owner_id: int,
    subject: str,
    text: str,
    sources: Sequence[int],
    said_at: datetime,
    extractor: str,
    replaces: int | None = None,
    merge: bool = True,
) -> tuple[Message | int, bool]:
    """Store the fact `text` about `subject`, drawn from `sources`; (the fact or its id, whether it is new).

    An identical live fact of the same subject gains edges from `sources` instead, unless a newer fact
    supersedes it: the statement said again is then a new fact, current again ("Lisbon, Porto, Lisbon"). Refused with
    `SourcesRemoved` (nothing written) unless every source is live. `replaces`: the removed fact this
    one re-derives (an undo of the deletion removes it again, chat/facts/rederive.py): nothing is stored if
    that fact is live again meanwhile (the deletion was undone first). `merge=False` (a correction): always
    a new fact, even if the same words are live already.
    """
    edges = [Source(id=pk, rank=rank, score=1.0, signal=ContextEdge.Signal.FACT) for rank, pk in enumerate(sources)]
    thread = facts_thread(owner_id=owner_id)
    with transaction.atomic():
        owner_lock(owner_id)
        if (
            replaces is not None
            and Message.objects.filter(owner_id=owner_id, pk=replaces, status__in=Message.LIVE).exists()
        ):
            return replaces, False
        same = _same_current(owner_id=owner_id, thread_id=thread.pk, subject=subject, text=text) if merge else None
        if same is not None:
            edges_add(owner_id=owner_id, target_id=same, sources=edges)
            return same, False
        fact = message_store(
            owner_id=owner_id,
            thread_id=thread.pk,
            role=Message.Role.FACT,
            content=text,
            sources=edges,
            said_at=said_at,
            replaces=replaces,
        )
        Fact.objects.create(owner_id=owner_id, message_id=fact.pk, subject=subject, extractor=extractor)
    return fact, True
