"""Confirming a deletion: execute it now or schedule its expiry, then its receipt and follow-ups after the commit."""

import logging

from django.db import transaction
from django.utils import timezone

from chat.models import Message
from chat.turns.start import validate_content
from chat.writer import (
    messages_expiring_mark,
)
from core.errors import Conflict, NotFound, ValidationFailed
from core.types import User
from provenance.deletions.preview import Mode, Status, validate_derived
from provenance.deletions.receipts import deletion_verify
from provenance.deletions.remove import (
    VerifyLater,
    dependents_remove,
    followups_after_commit,
    indexes_embed,
    locked_deletion,
    regeneration_start,
)
from provenance.models import DeletionRequest

logger = logging.getLogger(__name__)


def _validate_redactions(*, owner_id: int, matched: list[int], redactions: object) -> dict[int, str]:
    """{message id: approved text} for matched user messages of the owner; a clear 400 otherwise."""
    if redactions is None:
        return {}
    if not isinstance(redactions, dict):
        raise ValidationFailed("redactions maps message ids to their approved text.", fields={"redactions": "invalid"})
    approved: dict[int, str] = {}
    for key, text in redactions.items():
        try:
            message_id = int(key)
        except (TypeError, ValueError):
            raise ValidationFailed(f"{key!r} is no message id.", fields={"redactions": "invalid id"}) from None
        if message_id not in matched:
            raise ValidationFailed(
                f"Message {message_id} is not among this deletion's matched messages.",
                fields={"redactions": "not matched"},
            )
        try:
            approved[message_id] = validate_content(text)
        except ValidationFailed:
            raise ValidationFailed(
                f"The redacted text of message {message_id} is empty or too long; delete the whole message instead.",
                fields={"redactions": "invalid text"},
            ) from None
    roles = dict(Message.objects.filter(owner_id=owner_id, pk__in=approved).values_list("pk", "role"))
    not_user = sorted(pk for pk in approved if roles.get(pk) != Message.Role.USER)
    if not_user:
        raise ValidationFailed(
            f"Only your own messages can be redacted (message {not_user[0]} is a reply).",
            fields={"redactions": "not a user message"},
        )
    return approved


def deletion_confirm(
    *,
    deletion_id: int,
    owner_id: int,
    confirmed_by: User,
    derived: str | None = None,
    redactions: dict[str, str] | None = None,
    verify_later: bool = False,
) -> DeletionRequest:
    """Execute a previewed deletion (soft, purge) or schedule it (expire).

    In one transaction under the owner's lock: recompute Dep(M) (replies may
    have appeared since the preview) and apply the mode; redacted messages get
    their replacement; with `derived="regenerate"` (or a redaction) the removed
    replies to rewrite get pending turns; write the audit row. After commit, a
    purge enqueues a VACUUM and an expire enqueues its timer, an executed
    deletion is verified (its receipt, `deletion_verify`), and then its
    regeneration is enqueued (`provenance.regeneration_run`).
    With `verify_later` (the HTTP confirm), the verification runs after this
    returns, in a thread that read the forget probe on the deletion's
    snapshot (`probe_handoff`): the deletion is returned executed with no
    receipt yet (`verifying`). Inside a caller's transaction no other
    connection could see the deletion before that transaction commits, so
    it is verified before this returns, as are deletions whose thread could
    not take over and every call without `verify_later`.
    `derived` given here overrides the preview's choice; `redactions` is
    {matched user message id: approved text}. Confirming an executed or
    scheduled deletion again returns it unchanged.
    """
    probe = None
    later = VerifyLater(deletion_id) if verify_later and not transaction.get_connection().in_atomic_block else None
    preview = DeletionRequest.objects.filter(pk=deletion_id, owner_id=owner_id).first()
    if preview is None:
        raise NotFound(f"No deletion with id {deletion_id}.")
    if derived is not None:
        validate_derived(derived)
    approved = _validate_redactions(owner_id=owner_id, matched=preview.matched_ids, redactions=redactions)
    if approved and preview.mode == Mode.EXPIRE and preview.status == Status.PREVIEWED:
        raise ValidationFailed("Redaction happens at confirm; use mode soft or purge.", fields={"redactions": "expire"})
    with transaction.atomic():
        deletion = locked_deletion(deletion_id=deletion_id, owner_id=owner_id)
        if deletion.status in (Status.EXECUTED, Status.SCHEDULED, Status.VERIFICATION_FAILED):
            return deletion
        if deletion.status != Status.PREVIEWED:
            raise Conflict(f"This deletion is {deletion.status}; it can no longer be confirmed.")
        if derived is not None:
            deletion.derived = derived
        deletion.confirmed_by = confirmed_by
        deletion.confirmed_at = timezone.now()
        if deletion.mode == Mode.EXPIRE:
            assert deletion.expire_at is not None  # the preview requires it for mode expire
            if deletion.expire_at <= deletion.confirmed_at:
                raise Conflict("expire_at has passed since the preview; preview the deletion again.")
            # Only the matched messages are marked: Dep is recomputed when the
            # expiry fires, so replies derived in the meantime go too.
            messages_expiring_mark(
                owner_id=owner_id, ids=deletion.matched_ids, deletion_id=deletion.pk, expires_at=deletion.expire_at
            )
            deletion.status = Status.SCHEDULED
            deletion.outcome = f"scheduled for {deletion.expire_at.isoformat()}"
        else:
            probe = dependents_remove(
                deletion=deletion, purge=deletion.mode == Mode.PURGE, replacements=approved, then=later
            )
        deletion.save()
        followups_after_commit(deletion)
    if probe is not None:
        indexes_embed(owner_id=deletion.owner_id, reindexed=probe.reindexed)
        deletion = deletion_verify(deletion_id=deletion.pk, probe=probe)
        regeneration_start(deletion)
    elif later is not None:
        # The receipt is the verifying thread's.
        indexes_embed(owner_id=deletion.owner_id, reindexed=frozenset(later.reindexed))
    logger.info("deletion %s %s: %s messages", deletion.pk, deletion.status, len(deletion.deleted_ids))
    deletion.refresh_from_db()
    return deletion
