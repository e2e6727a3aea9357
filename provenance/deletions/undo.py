"""Undoing a soft deletion, and resuming one whose removal was interrupted."""

from django.db import transaction
from django.utils import timezone

from chat.facts.decisions import facts_declined
from chat.index.context import index_dependents, index_followers
from chat.models import Message, Turn
from chat.titles import titles_rederive
from chat.turns.regeneration import regeneration_turns_close
from chat.writer import (
    SourcesRemoved,
    messages_remove,
    messages_restore,
)
from chat.writer.vectors import messages_index_embed
from core.errors import Conflict
from provenance.deletions.facts import fact_decline
from provenance.deletions.preview import Mode, Status
from provenance.deletions.remove import expiring_again, locked_deletion, messages_phrase, regeneration_start
from provenance.models import DeletionRequest
from provenance.regeneration.replies import undo_plan


def undo_check(deletion: DeletionRequest) -> None:
    """Refuse (Conflict) a deletion no undo can restore: only an executed soft deletion can be undone."""
    # A soft deletion whose receipt failed still removed its messages; the owner may restore them.
    if deletion.mode != Mode.SOFT or deletion.status not in (Status.EXECUTED, Status.VERIFICATION_FAILED):
        raise Conflict("Only an executed soft deletion can be undone.")


def deletion_undo(*, deletion_id: int, owner_id: int) -> DeletionRequest:
    """Restore exactly the messages a soft deletion removed.

    Refused (nothing changes) if any of them has since been purged, or if a
    restored message would have a parent that is still removed (I1).
    """
    with transaction.atomic():
        deletion = locked_deletion(deletion_id=deletion_id, owner_id=owner_id)
        if deletion.status == Status.UNDONE:
            return deletion
        undo_check(deletion)
        removed = set(deletion.deleted_ids)
        still = set(
            Message.objects.filter(
                owner_id=owner_id, pk__in=removed, deleted_by_id=deletion.pk, status=Message.Status.DELETED
            ).values_list("pk", flat=True)
        )
        if still != removed:
            raise Conflict(
                f"{len(removed - still)} of these messages were purged by a later deletion; this one cannot be undone."
            )
        # The rewrites go first (regenerated replies, redacted replacements, and
        # everything since derived from them), then the originals come back,
        # which the writer refuses if one derives from a message removed by
        # another deletion (I1); the transaction then leaves everything as it was.
        regeneration_turns_close(owner_id=deletion.owner_id, deletion_id=deletion.pk, error="The deletion was undone.")
        rewrites = undo_plan(deletion=deletion).removes
        reindexed = set(index_dependents(owner_id=owner_id, ids=rewrites))
        messages_remove(owner_id=owner_id, ids=rewrites, deletion_id=deletion.pk, purge=False)
        try:
            messages_restore(owner_id=owner_id, ids=removed, deletion_id=deletion.pk)
        except SourcesRemoved as exc:
            raise Conflict(
                "These messages were generated from messages removed by another deletion "
                f"(ids {exc.ids[:10]}); undo that one first."
            ) from None
        expiring_again(owner_id=owner_id, ids=removed)
        # A fact the user declined since (in its re-derived form, whose sources it shares) does not come
        # back as current: it goes again, with what derives from it, by a soft deletion of its own. (An
        # undo of the decline's own deletion brings its fact back: that decline is not since.)
        declined = facts_declined(owner_id=owner_id, ids=removed, since=deletion.executed_at or deletion.created_at)
        # Declined as the Facts page declines: from every source it has back, so no re-derivation draws it
        # again from the one this deletion had removed.
        again = [fact_decline(owner=deletion.owner, fact_id=pk).pk for pk in declined]
        # The first message back gives its thread its title back; a rewrite removed takes the one drawn from it.
        titles_rederive(owner_id=owner_id, message_ids=[*removed, *rewrites])
        now = timezone.now()
        deletion.status = Status.UNDONE
        deletion.undone_at = now
        deletion.undo_removed_ids = rewrites
        deletion.outcome = (
            f"undone: restored {messages_phrase(len(removed))}"
            + (f", removed {len(rewrites)} rewritten" if rewrites else "")
            + (
                f"; {len(again)} fact(s) declined since removed again by deletion "
                + ", ".join(f"#{pk}" for pk in again)
                if again
                else ""
            )
        )
        deletion.save(update_fields=["status", "undone_at", "outcome", "undo_removed_ids"])
        # The restored messages' indexes and those after them were recomputed with them back.
        reindexed |= removed | set(index_followers(owner_id=owner_id, ids=removed))
    messages_index_embed(owner_id=owner_id, ids=reindexed)
    return deletion


def deletion_resume(*, deletion_id: int, owner_id: int) -> DeletionRequest:
    """Run again the regenerations of an executed deletion that failed or were cancelled.

    Each failed regeneration turn goes back to pending (its user message must
    still be live), the cancellation is lifted, and the regeneration is enqueued.
    """
    with transaction.atomic():
        deletion = locked_deletion(deletion_id=deletion_id, owner_id=owner_id)
        if deletion.status not in (Status.EXECUTED, Status.VERIFICATION_FAILED) or not deletion.regenerate_ids:
            raise Conflict("Only an executed deletion that rewrites replies can be resumed.")
        # A subquery, not a join: Django turns an UPDATE over a join into "id IN (...)", whose
        # outer UPDATE names no owner and so reads every partition of chat_turn.
        live = Message.objects.filter(owner_id=owner_id, status__in=Message.LIVE).values("pk")
        retried = Turn.objects.filter(
            owner_id=owner_id, deletion_id=deletion.pk, status=Turn.Status.FAILED, user_message_id__in=live
        ).update(status=Turn.Status.PENDING, error="", updated_at=timezone.now())
        deletion.regeneration_cancelled_at = None
        deletion.regeneration_finished_at = None
        deletion.outcome += f"; resumed {retried}"
        deletion.save(update_fields=["regeneration_cancelled_at", "regeneration_finished_at", "outcome"])
        transaction.on_commit(lambda: regeneration_start(deletion))
    return deletion
