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
from chat.retrieval.facts import LiveFact, fact_sources, subject_facts
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


def _single(subject: str) -> bool:
    known = SUBJECTS.get(subject)
    return known is not None and known.single


def _reinstated(*, removed: set[int], by_subject: dict[str, list[LiveFact]], subjects: Iterable[str]) -> list[dict]:
    """The older facts that become current when `removed` goes: of each single-valued subject whose current
    fact it removes, the newest fact that stays."""
    found = []
    for subject in sorted(set(subjects)):
        ordered = by_subject.get(subject, [])
        if not _single(subject) or not ordered or ordered[0].id not in removed:
            continue
        stays = next((fact for fact in ordered if fact.id not in removed), None)
        if stays is not None:
            found.append({"fact": stays.id, "instead_of": ordered[0].id, "subject": subject})
    return found


def facts_effect(
    *, owner_id: int, removed: set[int], by_subject: dict[str, list[LiveFact]] | None = None
) -> dict[str, Any]:
    """What removing `removed` (a Dep) does to the owner's facts: removed, re-derived and reinstated ones.

    `by_subject`: `subject_facts` of the owner's single-valued subjects, read once for a page of deletions.
    """
    facts = _facts_of(owner_id, removed)
    sources = fact_sources(owner_id=owner_id, ids=facts)
    survivors = {fact: [pk for pk in ids if pk not in removed] for fact, ids in sources.items()}
    singles = [subject for subject in facts.values() if _single(subject)]
    if by_subject is None:
        by_subject = subject_facts(owner_id=owner_id, subjects=singles)
    return {
        "removed": sorted(facts),
        "rederived": [{"fact": fact, "from": left} for fact, left in sorted(survivors.items()) if left],
        "reinstated": _reinstated(removed=removed, by_subject=by_subject, subjects=singles),
    }


NO_FACTS: dict[str, Any] = {"removed": [], "rederived": [], "reinstated": []}


def facts_attach(deletions: list[DeletionRequest]) -> None:
    """Set `facts` (`facts_effect` of its matched and dependent messages) on each deletion.

    One query finds which deletions touch facts at all (most touch none); only those read more, and the
    single-valued subjects' facts are read once for the whole page, and only for previews (what would become
    current; a deletion carried out lists what it removed and re-derived).
    """
    touched = dict(
        Fact.objects.filter(
            owner_id__in={d.owner_id for d in deletions},
            message_id__in=sorted({pk for d in deletions for pk in (*d.matched_ids, *d.dependent_ids)}),
        ).values_list("message_id", "subject")
    )
    previews = [d for d in deletions if d.status == DeletionRequest.Status.PREVIEWED]
    singles = {subject for subject in touched.values() if _single(subject)}
    by_owner = {
        owner_id: subject_facts(owner_id=owner_id, subjects=singles) if singles else {}
        for owner_id in {d.owner_id for d in previews}
    }
    for deletion in deletions:
        removed = {*deletion.matched_ids, *deletion.dependent_ids}
        if not removed.intersection(touched):
            deletion.facts = NO_FACTS
            continue
        preview = deletion.status == DeletionRequest.Status.PREVIEWED
        effect = facts_effect(
            owner_id=deletion.owner_id, removed=removed, by_subject=by_owner.get(deletion.owner_id, {})
        )
        if not preview:
            effect["reinstated"] = []
            rederived = dict(
                Message.objects.filter(
                    owner_id=deletion.owner_id, role=Message.Role.FACT, replaces__in=effect["removed"]
                ).values_list("replaces", "pk")
            )
            for item in effect["rederived"]:
                item["as"] = rederived.get(item["fact"])
        deletion.facts = effect


def related_information(
    *, owner: User, matched: list[int], members: set[int], near_misses: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """The owner's live messages and facts outside `members` (a Dep) that carry what `matched` says; see above.

    `near_misses` (a selection by identifier's): messages kept although they hold another identifier of
    the kind named, listed first with their reason."""
    related: dict[int, dict[str, Any]] = {}
    for miss in near_misses or []:
        pk = int(miss["message"])
        if pk not in members:
            related.setdefault(pk, {"id": pk, "kind": "message", "reason": f"kept: it {miss['reason']}"})
    facts = _facts_of(owner.pk, members)
    for subject, ordered in subject_facts(owner_id=owner.pk, subjects=facts.values()).items():
        label = SUBJECTS[subject].label if subject in SUBJECTS else subject
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
    # A selection by identifier kept the messages holding another one of its kind: listed first.
    near = list(deletion.resolution["near_misses"]) if deletion.resolution else []
    deletion.related = tuple(
        related_information(owner=deletion.owner, matched=deletion.matched_ids, members=members, near_misses=near)
    )
    return deletion


def fact_decline(*, owner: User, fact_id: int) -> DeletionRequest:
    """Decline a fact: recorded against its sources, then removed by a confirmed soft deletion; that deletion.

    The deletion takes what derives from the fact (the replies that used it: undo brings them back), and a
    correction message the fact was drawn from.
    """
    fact, _ = fact_get(owner_id=owner.pk, fact_id=fact_id)
    sources = declines_record(owner_id=owner.pk, fact_id=fact_id)
    # A correction the user typed on the Facts page lives only for its fact: declined, it goes with it.
    corrections = Message.objects.filter(
        owner=owner, pk__in=sources, thread_id=fact.thread_id, role=Message.Role.USER
    ).values_list("pk", flat=True)
    ids = sorted({fact_id, *corrections})
    preview = deletion_preview(owner=owner, actor=owner, mode=Mode.SOFT, ids=ids, offer_redactions=False)
    return deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)
