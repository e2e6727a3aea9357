"""A fact re-derived from the sources that survive a deletion (paper, VII-C), and what a deletion does to facts.

A deletion removes a fact with any of its sources (it is in their Dep), so
at no instant is a fact live with a removed source (I1). Afterwards, in the
worker, each removed fact that still has live sources is drawn again from
them alone (`facts_rederive`). Every source of a fact said its statement:
a fact gains a source only when the extractor draws the same statement from
another message (`chat.writer.facts.fact_store`). So the survivors' statement
is the fact's own text, kept while the deletion was soft; a purge emptied it,
and then the newest survivor is read again (the rules, or one model call,
charged to the owner's budget), keeping its statement of the fact's subject,
and every survivor is a source of it (each said that statement): declining it
later declines it from all of them, and forgetting one leaves the others'.
The new fact `replaces` the old one (an id), so an undo of the deletion
removes it again before the old one comes back. A fact with no survivor stays
gone, and an older fact its subject had superseded is current again
(`chat.retrieval.facts`).
"""

from chat.facts.extract import extractor
from chat.facts.model import ExtractionFailed, model_statements
from chat.models import Fact, FactDecline, Message
from chat.retrieval.facts import fact_sources
from chat.statements import statements
from chat.writer import SourcesRemoved
from chat.writer.facts import fact_store
from chat.writer.vectors import messages_index_embed
from core.api.budgets import budget_take


class BudgetSpent(Exception):
    """The owner's model budget has no room now: `wait` seconds until it has."""

    def __init__(self, wait: float | None) -> None:
        self.wait = wait
        super().__init__("the model budget is spent")


def facts_removed(*, owner_id: int, ids: list[int]) -> list[int]:
    """The facts among these message ids, ascending."""
    return sorted(
        Message.objects.filter(owner_id=owner_id, pk__in=ids, role=Message.Role.FACT).values_list("pk", flat=True)
    )


def _statement_of(*, owner_id: int, subject: str, content: str) -> str | None:
    """The newest survivor's statement of `subject`, read again (its fact's text was purged)."""
    if extractor() == "rules":
        found = statements(content)
    else:
        taken, wait = budget_take(user_id=owner_id, scope="facts", wanted=1)
        if not taken:
            raise BudgetSpent(wait)
        try:
            found = model_statements(content)
        except ExtractionFailed:
            return None
    return next((s.text for s in found if s.subject == subject), None)


def facts_rederive(*, owner_id: int, fact_ids: list[int]) -> list[int]:
    """Re-derive each removed fact of `fact_ids` from its live sources; the ids of the facts stored.

    Raises `BudgetSpent` (what was stored so far stays) when a purged fact needs the model and its budget is
    spent: the task asks again later, and the facts done are not done twice (their re-derivation is live).
    """
    removed = {
        pk: (content, status)
        for pk, content, status in Message.objects.filter(
            owner_id=owner_id, pk__in=fact_ids, role=Message.Role.FACT, status__in=Message.REMOVED
        ).values_list("pk", "content", "status")
    }
    done = set(
        Message.objects.filter(
            owner_id=owner_id, role=Message.Role.FACT, replaces__in=sorted(removed), status__in=Message.LIVE
        ).values_list("replaces", flat=True)
    )
    todo = sorted(set(removed) - done)
    subjects = dict(Fact.objects.filter(owner_id=owner_id, message_id__in=todo).values_list("message_id", "subject"))
    survivors = fact_sources(owner_id=owner_id, ids=todo)
    stored: list[int] = []
    try:
        for old in todo:
            subject = subjects.get(old)
            declined = set(
                FactDecline.objects.filter(
                    owner_id=owner_id, source_id__in=survivors.get(old, []), subject=subject
                ).values_list("source_id", flat=True)
            )
            sources = [pk for pk in survivors.get(old, []) if pk not in declined]
            if not sources or subject is None:
                continue
            # Live now, read again right before a model call: a survivor removed since is never sent upstream.
            rows = Message.objects.filter(owner_id=owner_id, pk__in=sources, status__in=Message.LIVE).order_by("-seq")
            said = [
                (pk, source or created)
                for pk, source, created in rows.values_list("pk", "source_created_at", "created_at")
            ]
            if not said:
                continue
            content, status = removed[old]
            text = content if status != Message.Status.PURGED and content else None
            if text is None:
                newest = rows.values_list("content", flat=True).first() or ""
                text = _statement_of(owner_id=owner_id, subject=subject, content=newest)
                if text is None:
                    continue
            try:
                fact, created = fact_store(
                    owner_id=owner_id,
                    subject=subject,
                    text=text,
                    sources=[pk for pk, _ in said],
                    said_at=max(when for _, when in said),
                    extractor=extractor(),
                    replaces=old,
                )
            except SourcesRemoved:
                continue
            if created:
                stored.append(fact.pk if isinstance(fact, Message) else fact)
    finally:
        messages_index_embed(owner_id=owner_id, ids=stored)
    # Every purged fact is settled now (re-derived, or with nothing left to draw it from): it tells nobody
    # what it was about. A soft-deleted one keeps its subject for an undo (and shows it nowhere).
    purged = [pk for pk, (_, status) in removed.items() if status == Message.Status.PURGED]
    Fact.objects.filter(owner_id=owner_id, message_id__in=purged).update(subject="")
    return stored
