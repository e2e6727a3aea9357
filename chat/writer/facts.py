"""Storing facts (chat/facts/): a `fact` message in the owner's facts thread, a `fact` edge from each source.

Through `graph_store` and `edges_add`, so the writer's rule holds: a fact is stored only while every
message it is drawn from is live, under the owner's lock. The same statement drawn again from another
message is the same fact with one more source (an edge), not a copy, unless a newer fact of its subject
superseded it: said again, it is a new fact, current again ("Lisbon, Porto, Lisbon"). Forgetting one of
two sources then re-derives the fact from the other (chat/facts/rederive.py).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models.functions import Lower

from chat.models import ContextEdge, Fact, Message, Thread
from chat.retrieval.facts import subject_facts
from chat.subjects import FACTS_SOURCE, FACTS_SOURCE_ID, FACTS_TITLE, SUBJECTS
from chat.writer.messages import GraphEdge, GraphMessage, Source, SourcesRemoved, Supplied, edges_add, graph_store
from core.db.locks import owner_lock

FACT_SIGNAL = ContextEdge.Signal.FACT.value


def facts_thread(*, owner_id: int) -> Thread:
    """The owner's facts thread, created the first time (its source marks it, like the agent notes')."""
    thread, _ = Thread.objects.get_or_create(
        owner_id=owner_id, source=FACTS_SOURCE, source_id=FACTS_SOURCE_ID, defaults={"title": FACTS_TITLE}
    )
    return thread


@dataclass(frozen=True)
class NewFact:
    """A statement to store: drawn from the live message `source`, said at `said_at`."""

    source: int
    subject: str
    text: str
    said_at: datetime


def _single(subject: str) -> bool:
    return subject in SUBJECTS and SUBJECTS[subject].single


def facts_store_many(
    *, owner_id: int, facts: Sequence[NewFact], extractor: str, merge: bool = True
) -> tuple[list[int], list[int]]:
    """Store statements in order, in one transaction under the owner's lock; (new fact ids, facts merged into).

    A statement whose source is no longer live is dropped (nothing of it is written). One that an
    identical live fact of its subject already says (case aside) gives that fact one more source, if the
    fact is current (a many-valued subject's always is); any other is a new fact. `merge=False`: always new.
    """
    thread = facts_thread(owner_id=owner_id)
    with transaction.atomic():
        owner_lock(owner_id)
        live = set(
            Message.objects.filter(
                owner_id=owner_id, pk__in={f.source for f in facts}, status__in=Message.LIVE
            ).values_list("pk", flat=True)
        )
        facts = [fact for fact in facts if fact.source in live]
        # {(subject, text in lower case): fact id or new key}: the facts a statement may join.
        said: dict[tuple[str, str], list[int | str]] = {}
        if merge and facts:
            texts = {fact.text.lower() for fact in facts}
            same = (
                Message.objects.filter(
                    owner_id=owner_id, thread_id=thread.pk, role=Message.Role.FACT, status__in=Message.LIVE
                )
                .annotate(lower=Lower("content"))
                .filter(lower__in=texts)
                .values_list("pk", "lower")
            )
            words = dict(same)
            for pk, subject in Fact.objects.filter(owner_id=owner_id, message_id__in=words).values_list(
                "message_id", "subject"
            ):
                said.setdefault((subject, words[pk]), []).append(pk)
        # The current fact of each single-valued subject, (id or new key, said at), kept as statements land.
        heads: dict[str, tuple[int | str, datetime]] = {
            subject: (ordered[0].id, ordered[0].said_at)
            for subject, ordered in subject_facts(
                owner_id=owner_id, subjects={f.subject for f in facts if _single(f.subject)}
            ).items()
        }
        new: list[GraphMessage] = []
        subjects: dict[str, str] = {}
        edges: list[GraphEdge] = []
        joined: list[tuple[int, Source]] = []
        for number, fact in enumerate(facts):
            key = (fact.subject, fact.text.lower())
            known = said.get(key, [])
            batch = [pk for pk in known if isinstance(pk, str)]
            head = heads.get(fact.subject)
            if batch:
                # Said twice in this batch: one fact.
                target: int | str | None = batch[0]
            elif not merge or not known:
                target = None
            elif _single(fact.subject):
                target = head[0] if head is not None and head[0] in known else None
            else:
                target = known[0]
            if target is None:
                target = f"new-{number}"
                subjects[target] = fact.subject
                new.append(
                    GraphMessage(
                        key=target,
                        conversation="facts",
                        supplied=Supplied(role=Message.Role.FACT, content=fact.text, source_created_at=fact.said_at),
                    )
                )
                said.setdefault(key, []).append(target)
            if isinstance(target, int):
                joined.append((target, Source(id=fact.source, rank=0, score=1.0, signal=FACT_SIGNAL)))
            else:
                edges.append(GraphEdge(source=fact.source, target=target, rank=0, score=1.0, signal=FACT_SIGNAL))
            # The newest said of a single-valued subject is its current fact.
            if _single(fact.subject) and (head is None or fact.said_at >= head[1] or head[0] == target):
                heads[fact.subject] = (target, max(fact.said_at, head[1]) if head else fact.said_at)
        stored = graph_store(
            owner_id=owner_id,
            messages=new,
            existing={fact.source: fact.source for fact in facts},
            edges=edges,
            conversations={},
            thread_for=lambda conversation: thread.pk,
        )
        Fact.objects.bulk_create(
            [
                Fact(owner_id=owner_id, message_id=row.pk, subject=subjects[str(message.key)], extractor=extractor)
                for message, row in zip(new, stored.created, strict=True)
            ]
        )
        if joined:
            edges_add(owner_id=owner_id, edges=joined)
    return [row.pk for row in stored.created], sorted({target for target, _ in joined})


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

    As `facts_store_many` for one statement said by several messages. Refused with `SourcesRemoved`
    (nothing written) unless every source is live. `replaces`: the removed fact this one re-derives (an undo
    of the deletion removes it again, chat/facts/rederive.py): nothing is stored if that fact is live again
    meanwhile (the deletion was undone first).
    """
    with transaction.atomic():
        owner_lock(owner_id)
        if (
            replaces is not None
            and Message.objects.filter(owner_id=owner_id, pk=replaces, status__in=Message.LIVE).exists()
        ):
            return replaces, False
        missing = set(sources) - set(
            Message.objects.filter(owner_id=owner_id, pk__in=sources, status__in=Message.LIVE).values_list(
                "pk", flat=True
            )
        )
        if missing:
            raise SourcesRemoved(missing)
        items = [NewFact(source=pk, subject=subject, text=text, said_at=said_at) for pk in sources]
        created, joined = facts_store_many(owner_id=owner_id, facts=items, extractor=extractor, merge=merge)
        if created:
            fact = Message.objects.get(owner_id=owner_id, pk=created[0])
            if replaces is not None:
                Message.objects.filter(owner_id=owner_id, pk=fact.pk).update(replaces=replaces)
                fact.replaces = replaces
            return fact, True
    return joined[0], False
