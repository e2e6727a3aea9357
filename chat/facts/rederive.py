"""A fact re-derived from the sources that survive a deletion (paper, VII-C), and what a deletion does to facts.

A deletion removes a fact with any of its sources (it is in their Dep), so
at no instant is a fact live with a removed source (I1). Afterwards, in the
worker, each removed fact that still has live sources is drawn again from
them alone (`facts_rederive`): the same extractor over the survivors' words,
keeping the statements of the fact's subject; the new fact `replaces` the old
one (an id), so an undo of the deletion removes it again before the old one
comes back. A fact with no survivor stays gone, and an older fact its subject
had superseded is current again (`chat.retrieval.facts`).
"""

from datetime import datetime

from chat.facts.extract import extractor
from chat.facts.model import ExtractionFailed, model_statements
from chat.facts.rules import statements
from chat.models import Fact, FactDecline, Message
from chat.retrieval.facts import fact_sources
from chat.writer import SourcesRemoved
from chat.writer.facts import fact_store
from chat.writer.vectors import messages_index_embed


def facts_removed(*, owner_id: int, ids: list[int]) -> list[int]:
    """The facts among these message ids, ascending."""
    return sorted(
        Message.objects.filter(owner_id=owner_id, pk__in=ids, role=Message.Role.FACT).values_list("pk", flat=True)
    )


def facts_rederive(*, owner_id: int, fact_ids: list[int]) -> list[int]:
    """Re-derive each removed fact of `fact_ids` from its live sources; the ids of the facts stored."""
    removed = set(
        Message.objects.filter(
            owner_id=owner_id, pk__in=fact_ids, role=Message.Role.FACT, status__in=Message.REMOVED
        ).values_list("pk", flat=True)
    )
    done = set(
        Message.objects.filter(
            owner_id=owner_id, role=Message.Role.FACT, replaces__in=sorted(removed), status__in=Message.LIVE
        ).values_list("replaces", flat=True)
    )
    todo = sorted(removed - done)
    subjects = dict(Fact.objects.filter(owner_id=owner_id, message_id__in=todo).values_list("message_id", "subject"))
    survivors = fact_sources(owner_id=owner_id, ids=todo)
    how = extractor()
    stored: list[int] = []
    for old in todo:
        sources = survivors.get(old, [])
        subject = subjects.get(old)
        if not sources or subject is None:
            continue
        declined = set(
            FactDecline.objects.filter(owner_id=owner_id, source_id__in=sources, subject=subject).values_list(
                "source_id", flat=True
            )
        )
        rows = (
            Message.objects.filter(owner_id=owner_id, pk__in=[pk for pk in sources if pk not in declined])
            .order_by("-seq")
            .values_list("pk", "content", "source_created_at", "created_at")
        )
        drawn: list[tuple[int, str, datetime]] = []
        for pk, content, source_created_at, created_at in rows:
            try:
                found = statements(content) if how == "rules" else model_statements(content)
            except ExtractionFailed:
                continue
            drawn += [(pk, s.text, source_created_at or created_at) for s in found if s.subject == subject]
        if not drawn:
            continue
        text = drawn[0][1]
        same = sorted({pk for pk, words, _ in drawn if words.lower() == text.lower()})
        try:
            fact, _ = fact_store(
                owner_id=owner_id,
                subject=subject,
                text=text,
                sources=same,
                said_at=max(when for pk, words, when in drawn if pk in same),
                extractor=how,
                replaces=old,
            )
        except SourcesRemoved:
            continue
        stored.append(fact.pk if isinstance(fact, Message) else fact)
    messages_index_embed(owner_id=owner_id, ids=stored)
    return stored
