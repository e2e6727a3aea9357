"""What a deletion does to distilled memory, and related information outside Dep (paper, VII-B and VII-C).

- `facts_attach`: for each deletion, the facts in its Dep (they go with their
  sources, I1), which of them keep live sources outside it (re-derived from
  those after the deletion, chat/facts/rederive.py) and which older facts
  become current again when the newer fact of their subject goes.
- `related_information`: the user's other live messages and facts that carry
  the same information as what a deletion removes but are not in its Dep: the
  facts of the same subject, the messages those were drawn from, and the
  messages nearest in meaning to the matched ones. Listed unticked, each with
  its reason, so the user can take them too.
- `fact_decline`: the user declines a fact: never drawn again from its
  sources, and removed now by a soft deletion of the fact (its preview and
  receipt, undoable like any).
"""

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from pgvector.django import CosineDistance

from chat.facts.decisions import declines_record, fact_get
from chat.models import Fact, Message
from chat.retrieval.facts import fact_sources, subject_facts
from chat.subjects import SUBJECTS
from core.types import User
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import Mode, deletion_preview
from provenance.models import DeletionRequest

# Related items listed with a preview, the nearest first.
RELATED_LISTED = 20


def _facts_of(owner_id: int, ids: Iterable[int]) -> dict[int, str]:
    """{fact id: subject} for the facts among these ids."""
    return dict(
        Fact.objects.filter(owner_id=owner_id, message_id__in=sorted(set(ids))).values_list("message_id", "subject")
    )


def facts_effect(*, owner_id: int, removed: set[int]) -> dict[str, Any]:
    """What removing `removed` (a Dep) does to the owner's facts: removed, re-derived and reinstated ones."""
    facts = _facts_of(owner_id, removed)
    sources = fact_sources(owner_id=owner_id, ids=facts)
    survivors = {fact: [pk for pk in ids if pk not in removed] for fact, ids in sources.items()}
    by_subject = subject_facts(owner_id=owner_id, subjects=facts.values())
    reinstated = []
    for subject, ordered in by_subject.items():
        if not SUBJECTS[subject].single or ordered[0].id not in removed:
            continue
        # The newest fact that stays becomes current: the one the removed current fact superseded.
        stays = next((fact for fact in ordered if fact.id not in removed), None)
        if stays is not None:
            reinstated.append({"fact": stays.id, "instead_of": ordered[0].id, "subject": subject})
    return {
        "removed": sorted(facts),
        "rederived": [{"fact": fact, "from": left} for fact, left in sorted(survivors.items()) if left],
        "reinstated": reinstated,
    }


NO_FACTS: dict[str, Any] = {"removed": [], "rederived": [], "reinstated": []}


def facts_attach(deletions: list[DeletionRequest]) -> None:
    """Set `facts` (`facts_effect` of its matched and dependent messages) on each deletion.

    One query finds which deletions touch facts at all (most touch none); only those read more.
    """
    touched = set(
        Fact.objects.filter(
            owner_id__in={d.owner_id for d in deletions},
            message_id__in=sorted({pk for d in deletions for pk in (*d.matched_ids, *d.dependent_ids)}),
        ).values_list("message_id", flat=True)
    )
    for deletion in deletions:
        removed = {*deletion.matched_ids, *deletion.dependent_ids}
        if not removed & touched:
            deletion.facts = NO_FACTS
            continue
        effect = facts_effect(owner_id=deletion.owner_id, removed=removed)
        if deletion.status != DeletionRequest.Status.PREVIEWED:
            rederived = dict(
                Message.objects.filter(
                    owner_id=deletion.owner_id, role=Message.Role.FACT, replaces__in=effect["removed"]
                ).values_list("replaces", "pk")
            )
            for item in effect["rederived"]:
                item["as"] = rederived.get(item["fact"])
        deletion.facts = effect


def related_information(*, owner: User, matched: list[int], members: set[int]) -> list[dict[str, Any]]:
    """The owner's live messages and facts outside `members` (a Dep) that carry what `matched` says; see above."""
    related: dict[int, dict[str, Any]] = {}
    facts = _facts_of(owner.pk, members)
    for subject, ordered in subject_facts(owner_id=owner.pk, subjects=facts.values()).items():
        label = SUBJECTS[subject].label
        for fact in ordered:
            if fact.id not in members:
                related.setdefault(fact.id, {"id": fact.id, "kind": "fact", "reason": f"a fact about {label}"})
        kept = [f.id for f in ordered if f.id not in members]
        for ids in fact_sources(owner_id=owner.pk, ids=kept).values():
            for pk in ids:
                if pk not in members:
                    related.setdefault(pk, {"id": pk, "kind": "message", "reason": f"says a fact about {label}"})
    roots = Message.objects.filter(
        owner=owner, pk__in=matched, embedding__isnull=False, embedding_model=settings.DELLM_EMBEDDING_MODEL
    )
    for vector in roots.values_list("embedding", flat=True)[:10]:
        near = (
            Message.objects.filter(
                owner=owner,
                status__in=Message.LIVE,
                role__in=[Message.Role.USER, Message.Role.FACT, Message.Role.NOTE],
                embedding_model=settings.DELLM_EMBEDDING_MODEL,
            )
            .exclude(pk__in=sorted(members))
            .annotate(distance=CosineDistance("embedding", vector))
            .filter(distance__lte=1 - settings.DELLM_RELATED_THRESHOLD)
            .order_by("distance")
            .values_list("pk", "role", "distance")[:RELATED_LISTED]
        )
        for pk, role, distance in near:
            related.setdefault(
                pk,
                {
                    "id": pk,
                    "kind": "fact" if role == Message.Role.FACT else "message",
                    "reason": f"similar in meaning ({1 - distance:.2f})",
                },
            )
    return list(related.values())[:RELATED_LISTED]


def related_attach(deletion: DeletionRequest) -> DeletionRequest:
    """Set `related` on a preview the owner made (`related_information`); only the response creating it shows it."""
    members = {*deletion.matched_ids, *deletion.dependent_ids}
    deletion.related = tuple(related_information(owner=deletion.owner, matched=deletion.matched_ids, members=members))
    return deletion


def fact_decline(*, owner: User, fact_id: int) -> DeletionRequest:
    """Decline a fact: recorded against its sources, then removed by a confirmed soft deletion; that deletion."""
    fact_get(owner_id=owner.pk, fact_id=fact_id)
    declines_record(owner_id=owner.pk, fact_id=fact_id)
    preview = deletion_preview(owner=owner, actor=owner, mode=Mode.SOFT, ids=[fact_id], offer_redactions=False)
    return deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)
