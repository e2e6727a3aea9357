"""Turns that failed or stalled: fail, retry, and the sweep that finds the stuck ones."""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chat.models import Turn
from chat.turns.start import turn_enqueue
from core.errors import Conflict, NotFound


def turn_fail(*, turn_id: int, owner_id: int, error: str) -> Turn | None:
    """Mark a turn failed with a reason for humans (never message text)."""
    turns = Turn.objects.filter(owner_id=owner_id, pk=turn_id)
    turns.exclude(status=Turn.Status.DONE).update(status=Turn.Status.FAILED, error=error, updated_at=timezone.now())
    return turns.first()


def turn_retry(*, turn_id: int, owner_id: int) -> Turn:
    """Put a failed turn back to pending, keeping the user's message."""
    turn = (
        Turn.objects.select_related("user_message")
        .filter(owner_id=owner_id, pk=turn_id, user_message__owner_id=owner_id)
        .first()
    )
    if turn is None:
        raise NotFound(f"No turn with id {turn_id}.")
    if turn.status != Turn.Status.FAILED:
        raise Conflict("Only a failed turn can be retried.")
    if not turn.user_message.is_live:
        raise NotFound("The message of this turn has been deleted.")
    with transaction.atomic():
        Turn.objects.filter(owner_id=owner_id, pk=turn.pk, status=Turn.Status.FAILED).update(
            status=Turn.Status.PENDING, error="", updated_at=timezone.now()
        )
        transaction.on_commit(lambda: turn_enqueue(turn.pk, turn.owner_id))
    turn.refresh_from_db()
    return turn


def turns_stuck_sweep(*, now: datetime | None = None) -> dict[str, list[int]]:
    """Re-run or fail turns that made no progress for DELLM_TURN_STUCK_AFTER seconds.

    A turn whose task was lost (broker flushed, retries spent on a database
    outage, worker killed twice) would otherwise wait forever. One with fewer
    than DELLM_TURN_MAX_ATTEMPTS attempts goes back to pending and is enqueued
    again; the others fail with a reason, keeping the user's message (they
    can retry). Each change is a conditional UPDATE on the stale row, so a
    turn that moved in the meantime is left alone, and two sweeps do not
    both re-enqueue.
    """
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.DELLM_TURN_STUCK_AFTER)
    # Regeneration turns (Turn.deletion set) are left to their deletion's task,
    # which runs them one at a time, oldest first (acks_late; the user can
    # resume; provenance.regenerations_sweep enqueues it again if it was lost):
    # re-run here, a cancelled regeneration would come back.
    stuck = Turn.objects.filter(
        status__in=[Turn.Status.PENDING, Turn.Status.RUNNING], updated_at__lt=cutoff, deletion_id__isnull=True
    )
    swept: dict[str, list[int]] = {"rerun": [], "failed": []}
    for turn_id, owner_id, attempts in stuck.order_by("pk").values_list("pk", "owner_id", "attempts"):
        row = Turn.objects.filter(
            owner_id=owner_id, pk=turn_id, status__in=[Turn.Status.PENDING, Turn.Status.RUNNING], updated_at__lt=cutoff
        )
        if attempts >= settings.DELLM_TURN_MAX_ATTEMPTS:
            error = f"The reply could not be generated after {attempts} attempts; please retry."
            if row.update(status=Turn.Status.FAILED, error=error, updated_at=now):
                swept["failed"].append(turn_id)
        elif row.update(status=Turn.Status.PENDING, updated_at=now):
            swept["rerun"].append(turn_id)
            turn_enqueue(turn_id, owner_id)
    return swept
