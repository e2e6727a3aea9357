"""Regenerate what was derived: a deletion with `derived="regenerate"` rewrites the replies it removes.

At confirm, in the deletion's transaction under the owner's lock, Dep(M) is
removed as the mode says (old replies included, so I1 holds at every instant)
and one pending regeneration `Turn` is created per removed reply whose user
message survives (or was replaced by its redaction). A reply whose own user
message is removed is not rewritten: its question is gone.

The turns then run one at a time, oldest reply first (`provenance.regeneration_run`),
each through the ordinary turn protocol (`chat.turns.run.turn_run`): the context
is rebuilt from what is live, so removed messages are out and replies rewritten
earlier in this deletion are in; the reply commits under the owner's lock only
if its context is still live, takes the old reply's place in the thread, and
streams on the turn's events like any reply. A failed regeneration is a failed
turn: listed on the deletion, resumable. When none is left to run, the receipt
gains its `regeneration` check.
"""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from chat.models import ContextEdge, Message, Turn
from chat.selectors import tool_step_kinds
from core.db.locks import owner_lock
from provenance.dependents import dep_ids, explanation_paths, taint_violations
from provenance.models import DeletionRequest

logger = logging.getLogger(__name__)

Status = DeletionRequest.Status
OPEN = [Turn.Status.PENDING, Turn.Status.RUNNING]


def _user_messages(*, owner_id: int, reply_ids: set[int]) -> dict[int, tuple[int, str]]:
    """{reply id: (id of the user message it answers, the turn's context policy)}.

    The turn that produced a reply names its user message; a reply without one
    (imported, seeded) answers the source of its rank-0 edge.
    """
    answers: dict[int, tuple[int, str]] = {}
    rows = ContextEdge.objects.filter(owner_id=owner_id, target_id__in=reply_ids, rank=0)
    for target, source in rows.values_list("target_id", "source_id"):
        answers[target] = (source, settings.DELLM_CONTEXT_POLICY)
    turns = Turn.objects.filter(owner_id=owner_id, reply_id__in=reply_ids).order_by("pk")
    for reply, user, policy in turns.values_list("reply_id", "user_message_id", "policy"):
        answers[reply] = (user, policy)
    return answers


def regeneration_plan(
    *,
    owner_id: int,
    removed: set[int],
    matched: set[int],
    redacted: dict[int, int | None],
    rewrite_matched: bool = False,
) -> list[tuple[int, int, str]]:
    """[(reply id, user message id to answer, policy)] for the removed replies to rewrite, oldest first.

    A removed reply is rewritten when its user message is redacted (it answers
    the replacement) or when its user message stays live, unless the reply was
    itself selected by id (the user pointed at that very reply). A reply
    selected by phrase or meaning is rewritten: it merely quoted the words, and
    its question still deserves an answer. Tool steps are never rewritten. `redacted` maps an original to its
    replacement (None at preview time, before the replacement exists).
    """
    replies = dict(
        Message.objects.filter(owner_id=owner_id, pk__in=removed, role=Message.Role.ASSISTANT).values_list("pk", "seq")
    )
    # A tool step (a reply that called a `/v1` client's tools, or one written after their results) is
    # deleted, never rewritten: DeLLM cannot run the client's tools again (docs/OPENAI.md).
    for pk in tool_step_kinds(set(replies), owner_ids={owner_id}):
        del replies[pk]
    answers = _user_messages(owner_id=owner_id, reply_ids=set(replies))
    candidates = {user for user, _ in answers.values()} - removed
    live = set(
        Message.objects.filter(owner_id=owner_id, pk__in=candidates, status__in=Message.LIVE).values_list(
            "pk", flat=True
        )
    )
    plan = []
    for reply in sorted(replies, key=replies.__getitem__):
        if reply not in answers:
            continue
        user, policy = answers[reply]
        if user in redacted:
            plan.append((reply, redacted[user] or user, policy))
        elif (rewrite_matched or reply not in matched) and user in live:
            plan.append((reply, user, policy))
    return plan


def regeneration_next(*, deletion_id: int, owner_id: int) -> int | None:
    """The id of the next regeneration turn to run, oldest reply first; None when there is none.

    When none is left (all committed or failed) the regeneration is finished:
    its receipt check is written once.
    """
    deletion = DeletionRequest.objects.filter(owner_id=owner_id, pk=deletion_id).first()
    if deletion is None or deletion.status not in (Status.EXECUTED, Status.VERIFICATION_FAILED):
        return None
    if deletion.regeneration_cancelled_at is None:
        turn = (
            Turn.objects.filter(owner_id=deletion.owner_id, deletion_id=deletion_id, status__in=OPEN)
            .order_by("replaces")
            .first()
        )
        if turn is not None:
            return turn.pk
    if deletion.regeneration_finished_at is None:
        regeneration_verify(deletion_id=deletion_id, owner_id=owner_id)
    return None


def regenerations_stalled_sweep(*, now: datetime | None = None) -> dict[str, list[int]]:
    """{"resumed": [deletion ids], "failed": [turn ids]}: regenerations whose task was lost.

    A deletion's regeneration task can vanish (the web process died between
    the commit and the enqueue, the broker was flushed, its retries were spent
    on a database outage); the stuck-turn sweep leaves regeneration turns
    alone, so without this one such a regeneration would stay unfinished for
    ever. A regeneration is stalled when none of its turns changed for
    DELLM_TURN_STUCK_AFTER seconds and it has not written its receipt check.
    Its stale open turns are claimed by a conditional UPDATE (two sweeps do
    not both resume one with turns left; two runs of the task would still
    commit each reply once): one with DELLM_TURN_MAX_ATTEMPTS attempts fails
    (listed on the deletion, resumable), the others are touched. The caller
    enqueues `provenance.regeneration_run` for each resumed deletion, which
    runs what is left (a cancelled one runs nothing) and writes the check.
    """
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.DELLM_TURN_STUCK_AFTER)
    # Every deletion with replies to rewrite has their turns; none changed since the cutoff.
    stalled = (
        DeletionRequest.objects.filter(
            status__in=[Status.EXECUTED, Status.VERIFICATION_FAILED],
            receipt__isnull=False,
            regeneration_finished_at__isnull=True,
        )
        .exclude(regenerate_ids=[])
        .exclude(
            Exists(
                Turn.objects.filter(owner_id=OuterRef("owner_id"), deletion_id=OuterRef("pk"), updated_at__gte=cutoff)
            )
        )
        .order_by("pk")
        .values_list("pk", "owner_id")
    )
    swept: dict[str, list[int]] = {"resumed": [], "failed": []}
    # The list is every owner's; each deletion's turns are then read on its owner's partition.
    for deletion_id, owner_id in stalled:
        stale = Turn.objects.filter(owner_id=owner_id, deletion_id=deletion_id, status__in=OPEN, updated_at__lt=cutoff)
        claimed = False
        for turn_id, attempts in stale.order_by("replaces").values_list("pk", "attempts"):
            row = stale.filter(pk=turn_id)
            if attempts >= settings.DELLM_TURN_MAX_ATTEMPTS:
                error = f"The reply could not be rewritten after {attempts} attempts; resume to retry."
                if row.update(status=Turn.Status.FAILED, error=error, updated_at=now):
                    swept["failed"].append(turn_id)
                    claimed = True
            elif row.update(updated_at=now):
                claimed = True
        # None left open: only the receipt check was lost (the task died after the last commit).
        if claimed or not Turn.objects.filter(owner_id=owner_id, deletion_id=deletion_id, status__in=OPEN).exists():
            swept["resumed"].append(deletion_id)
    return swept


@dataclass(frozen=True)
class Progress:
    state: str  # running | done | failed | cancelled
    total: int
    rewritten: int
    failed: int
    pending: int
    turns: list[Turn]


def _regeneration_turns(*, deletion: DeletionRequest) -> list[Turn]:
    """The deletion's regeneration turns, oldest reply first: from `with_regeneration_turns`'s annotation if present."""
    rows: list[dict[str, object]] | None = getattr(deletion, "regeneration_turns", None)
    if rows is None:
        return list(Turn.objects.filter(owner_id=deletion.owner_id, deletion_id=deletion.pk).order_by("replaces", "pk"))
    return [Turn(owner_id=deletion.owner_id, deletion_id=deletion.pk, **row) for row in rows]


def regeneration_progress(*, deletion: DeletionRequest) -> Progress | None:
    """n of N rewritten, the failed ones, and each turn; None for a deletion that regenerates nothing."""
    turns = _regeneration_turns(deletion=deletion)
    if not turns:
        return None
    done = sum(turn.status == Turn.Status.DONE for turn in turns)
    failed = sum(turn.status == Turn.Status.FAILED for turn in turns)
    pending = len(turns) - done - failed
    if deletion.regeneration_cancelled_at is not None:
        state = "cancelled"
    elif pending:
        state = "running"
    else:
        state = "failed" if failed else "done"
    return Progress(state=state, total=len(turns), rewritten=done, failed=failed, pending=pending, turns=turns)


def _context_violations(*, owner_id: int, reply_ids: list[int]) -> list[list[int]]:
    """[reply, source] for each live rewritten reply with a context message that is not live."""
    rows = (
        ContextEdge.objects.filter(
            owner_id=owner_id,
            target_id__in=reply_ids,
            target__owner_id=owner_id,
            target__status__in=Message.LIVE,
            source__owner_id=owner_id,
        )
        .exclude(source__status__in=Message.LIVE)
        .order_by("target_id", "source_id")
        .values_list("target_id", "source_id")
    )
    return [list(row) for row in rows]


def regeneration_verify(*, deletion_id: int, owner_id: int) -> DeletionRequest:
    """Add the `regeneration` check to a deletion's receipt once no regeneration is left to run.

    Under the owner's lock: I1 for the owner again (rewritten replies brought
    new edges), and every rewritten reply's context holds only live messages.
    Failed regenerations are listed (they can be resumed), not a failed check.
    """
    with transaction.atomic():
        owner_lock(owner_id)
        deletion = DeletionRequest.objects.select_for_update().get(owner_id=owner_id, pk=deletion_id)
        if deletion.receipt is None or deletion.status not in (Status.EXECUTED, Status.VERIFICATION_FAILED):
            return deletion
        turns = list(
            Turn.objects.filter(owner_id=owner_id, deletion_id=deletion.pk)
            .order_by("replaces")
            .values_list("status", "reply_id", "replaces")
        )
        rewritten = [reply for status, reply, _ in turns if status == Turn.Status.DONE and reply is not None]
        violations = [[m, p] for _, m, p in taint_violations(owner_id=owner_id)]
        contexts = _context_violations(owner_id=owner_id, reply_ids=rewritten)
        check = {
            "passed": not violations and not contexts,
            "total": len(turns),
            "rewritten": rewritten,
            "failed": [old for status, _, old in turns if status == Turn.Status.FAILED],
            "pending": [old for status, _, old in turns if status in OPEN],
            "taint_violations": violations,
            "context_violations": contexts,
        }
        receipt = dict(deletion.receipt)
        receipt["checks"] = {**receipt["checks"], "regeneration": check}
        failed = sorted(name for name, c in receipt["checks"].items() if c is not None and not c["passed"])
        receipt["passed"], receipt["failed"] = not failed, failed
        deletion.receipt = receipt
        deletion.regeneration_finished_at = timezone.now()
        if failed:
            deletion.status = Status.VERIFICATION_FAILED
        deletion.save(update_fields=["receipt", "regeneration_finished_at", "status"])
    if failed:
        logger.error(
            "deletion %s regeneration FAILED verification: taint %s, contexts %s", deletion_id, violations, contexts
        )
    else:
        logger.info("deletion %s regeneration verified: %s of %s rewritten", deletion_id, len(rewritten), len(turns))
    return deletion


@dataclass(frozen=True)
class UndoPlan:
    """What undoing a soft deletion does: restore `restores`, remove the rewrites and their Dep (`removes`)."""

    restores: list[int]
    removes: list[int]
    explanations: dict[int, list[int]]


def undo_plan(*, deletion: DeletionRequest) -> UndoPlan:
    """The rewrites a deletion made (regenerated replies, redacted replacements, re-derived facts), their live Dep."""
    rewrites = set(
        Turn.objects.filter(owner_id=deletion.owner_id, deletion_id=deletion.pk, reply__isnull=False).values_list(
            "reply_id", flat=True
        )
    ) | {int(new) for new in deletion.redacted.values()}
    # Facts re-derived from the survivors of its sources (chat/facts/rederive.py): the originals come back.
    rewrites |= set(
        Message.objects.filter(
            owner_id=deletion.owner_id, role=Message.Role.FACT, replaces__in=deletion.deleted_ids
        ).values_list("pk", flat=True)
    )
    members = dep_ids(owner_id=deletion.owner_id, roots=sorted(rewrites))
    live = set(
        Message.objects.filter(owner_id=deletion.owner_id, pk__in=members, status__in=Message.LIVE).values_list(
            "pk", flat=True
        )
    )
    paths = explanation_paths(owner_id=deletion.owner_id, roots=sorted(rewrites))
    return UndoPlan(
        restores=sorted(deletion.deleted_ids),
        removes=sorted(live),
        explanations={node: path for node, path in sorted(paths.items()) if node in live},
    )
