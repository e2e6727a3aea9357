"""Expiring deletions: fire the ones due, or cancel one before it fires."""

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from chat.models import Turn
from chat.turns.regeneration import regeneration_turns_close
from chat.writer import (
    messages_expiring_clear,
)
from core.errors import Conflict
from provenance.deletions.preview import Status
from provenance.deletions.receipts import deletion_verify
from provenance.deletions.remove import (
    dependents_remove,
    expiring_again,
    followups_after_commit,
    indexes_embed,
    locked_deletion,
    regeneration_start,
)
from provenance.models import DeletionRequest
from provenance.regeneration.replies import regeneration_verify


def deletion_fire(*, deletion_id: int, now: datetime | None = None) -> DeletionRequest | None:
    """Carry out a scheduled expiry whose time has come (idempotent).

    Dep(M) is recomputed now, and everything in it is purged; then the
    deletion is verified (its receipt, `deletion_verify`).
    """
    now = now or timezone.now()
    owner_id = DeletionRequest.objects.filter(pk=deletion_id).values_list("owner_id", flat=True).first()
    if owner_id is None:
        return None
    with transaction.atomic():
        deletion = locked_deletion(deletion_id=deletion_id, owner_id=owner_id)
        if deletion.status != Status.SCHEDULED:
            return deletion
        assert deletion.expire_at is not None  # every scheduled deletion has its time
        if deletion.expire_at > now:
            return deletion
        probe = dependents_remove(deletion=deletion, purge=True)
        assert probe is not None  # read here: an expiry fires in a worker, not in a request
        deletion.outcome = f"expired: {deletion.outcome}"
        deletion.save()
        followups_after_commit(deletion)
    indexes_embed(owner_id=deletion.owner_id, reindexed=probe.reindexed)
    deletion = deletion_verify(deletion_id=deletion.pk, probe=probe)
    regeneration_start(deletion)
    return deletion


def deletions_due(*, now: datetime | None = None) -> list[int]:
    """Ids of scheduled expiries whose time has come."""
    now = now or timezone.now()
    return list(
        DeletionRequest.objects.filter(status=Status.SCHEDULED, expire_at__lte=now)
        .order_by("expire_at")
        .values_list("pk", flat=True)
    )


def deletion_cancel(*, deletion_id: int, owner_id: int) -> DeletionRequest:
    """Cancel a preview, a scheduled expiry before it fires (its messages return to active),
    or the regeneration of an executed deletion while it runs.

    Cancelling a regeneration fails its turns that have not committed (under
    the owner's lock, so none commits afterwards); replies already rewritten
    stay (their contexts held only live messages). The deletion stays executed.
    """
    with transaction.atomic():
        deletion = locked_deletion(deletion_id=deletion_id, owner_id=owner_id)
        if deletion.status == Status.CANCELLED:
            return deletion
        running = Turn.objects.filter(
            owner_id=owner_id, deletion_id=deletion.pk, status__in=[Turn.Status.PENDING, Turn.Status.RUNNING]
        ).exists()
        if deletion.status in (Status.EXECUTED, Status.VERIFICATION_FAILED) and (
            running or deletion.regeneration_cancelled_at is not None
        ):
            if deletion.regeneration_cancelled_at is None:
                closed = regeneration_turns_close(
                    owner_id=deletion.owner_id, deletion_id=deletion.pk, error="Regeneration cancelled."
                )
                deletion.regeneration_cancelled_at = timezone.now()
                deletion.outcome += f"; regeneration cancelled ({closed} not rewritten)"
                deletion.save(update_fields=["regeneration_cancelled_at", "outcome"])
                # The receipt's regeneration check, now: no rewrite is left to run.
                transaction.on_commit(lambda: regeneration_verify(deletion_id=deletion_id, owner_id=owner_id))
            return deletion
        if deletion.status not in (Status.PREVIEWED, Status.SCHEDULED):
            raise Conflict(f"This deletion is {deletion.status}; only a preview or a scheduled one can be cancelled.")
        if deletion.status == Status.SCHEDULED:
            messages_expiring_clear(owner_id=owner_id, deletion_id=deletion.pk)
            expiring_again(owner_id=owner_id, ids=deletion.matched_ids, cancelled=deletion.pk)
        deletion.status = Status.CANCELLED
        deletion.outcome = "cancelled"
        deletion.save(update_fields=["status", "outcome"])
    return deletion
