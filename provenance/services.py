"""Deletion: select M -> preview Dep(M) -> confirm (soft / purge / expire) -> undo or cancel.

Every state change of a deletion goes through one function here, each in its
own transaction, and every one that changes messages runs under the owner's
lock (`dellm_site.locks.owner_lock`), the same lock reply commits take.
Audit rows carry ids, counts and kinds, never message text or query text.
"""

import logging
import math
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from pgvector.django import CosineDistance

from chat.embeddings import embed_one
from chat.models import LIVE_STATUSES, Message
from dellm_site.errors import Conflict, NotFound, ValidationFailed
from dellm_site.locks import owner_lock
from dellm_site.types import User
from provenance.models import DeletionRequest
from provenance.selectors import dep_ids, explanation_paths
from provenance.tasks import deletion_fire_task, vacuum_messages_task
from provenance.verification import ForgetProbe, deletion_verify, forget_probe

logger = logging.getLogger(__name__)

Mode = DeletionRequest.Mode
Status = DeletionRequest.Status
MAX_SELECT_IDS = 10_000


def _validate_mode(mode: str) -> str:
    if mode not in Mode.values:
        raise ValidationFailed(
            f"Unknown deletion mode {mode!r}; use soft, purge or expire.", fields={"mode": "unknown"}
        )
    return mode


def _validate_depth(depth: int | None) -> int | None:
    if depth is None:
        return None
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        raise ValidationFailed("depth must be a whole number >= 0.", fields={"depth": "invalid"})
    return depth


def _validate_expire_at(mode: str, expire_at: datetime | None) -> datetime | None:
    if mode != Mode.EXPIRE:
        if expire_at is not None:
            raise ValidationFailed("expire_at is only for mode 'expire'.", fields={"expire_at": "unexpected"})
        return None
    if not isinstance(expire_at, datetime) or timezone.is_naive(expire_at):
        raise ValidationFailed(
            "mode 'expire' needs expire_at, a date and time with a time zone.", fields={"expire_at": "required"}
        )
    if expire_at <= timezone.now():
        raise ValidationFailed("expire_at must be in the future.", fields={"expire_at": "in the past"})
    return expire_at


def _validate_threshold(threshold: float | None) -> float:
    if threshold is None:
        return settings.DELLM_SEMANTIC_THRESHOLD
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
        raise ValidationFailed("threshold must be a number.", fields={"threshold": "invalid"})
    if not -1.0 <= threshold <= 1.0:
        raise ValidationFailed("threshold must be between -1 and 1.", fields={"threshold": "out of range"})
    return float(threshold)


def _select_ids(*, owner: User, ids: list[int] | None) -> list[int]:
    if not isinstance(ids, (list, tuple)) or not ids:
        raise ValidationFailed("ids must be a non-empty list of message ids.", fields={"ids": "invalid"})
    if len(ids) > MAX_SELECT_IDS:
        raise ValidationFailed(f"At most {MAX_SELECT_IDS} ids at once.", fields={"ids": "too many"})
    if any(isinstance(i, bool) or not isinstance(i, int) for i in ids):
        raise ValidationFailed("ids must be whole numbers.", fields={"ids": "invalid"})
    wanted = set(ids)
    found = set(Message.objects.filter(owner=owner, pk__in=wanted).values_list("pk", flat=True))
    missing = wanted - found
    if missing:
        # Another owner's id is reported exactly like one that does not exist.
        raise NotFound(f"No message with id {min(missing)}.")
    return sorted(found)


def _selectable(mode: str) -> list[str]:
    # A purge also reaches soft-deleted messages: the user wants the text gone.
    statuses = list(LIVE_STATUSES)
    if mode == Mode.PURGE:
        statuses.append(Message.Status.DELETED)
    return statuses


def _select_exact(*, owner: User, phrase: str | None, mode: str) -> list[int]:
    if not isinstance(phrase, str) or not phrase.strip():
        raise ValidationFailed("The phrase to delete is empty.", fields={"exact": "empty"})
    if len(phrase) > settings.DELLM_MAX_MESSAGE_CHARS:
        raise ValidationFailed("The phrase is too long.", fields={"exact": "too long"})
    matches = Message.objects.filter(owner=owner, status__in=_selectable(mode), content__icontains=phrase.strip())
    return sorted(matches.values_list("pk", flat=True))


def _select_semantic(*, owner: User, query: str | None, threshold: float, mode: str) -> list[int]:
    if not isinstance(query, str) or not query.strip():
        raise ValidationFailed("The text to match is empty.", fields={"semantic": "empty"})
    if len(query) > settings.DELLM_MAX_MESSAGE_CHARS:
        raise ValidationFailed("The text to match is too long.", fields={"semantic": "too long"})
    vector = embed_one(query)
    # Only vectors of the configured model are comparable with the query's
    # (during a `reembed` switch the others are left out, as in retrieval).
    matches = (
        Message.objects.filter(
            owner=owner,
            status__in=_selectable(mode),
            embedding__isnull=False,
            embedding_model=settings.DELLM_EMBEDDING_MODEL,
        )
        .alias(distance=CosineDistance("embedding", vector))
        .filter(distance__lte=1 - threshold)
    )
    return sorted(matches.values_list("pk", flat=True))


def deletion_preview(
    *,
    owner: User,
    actor: User,
    mode: str,
    ids: list[int] | None = None,
    exact: str | None = None,
    semantic: str | None = None,
    threshold: float | None = None,
    depth: int | None = None,
    expire_at: datetime | None = None,
    selector: str | None = None,
) -> DeletionRequest:
    """Select M, compute Dep(M) and explanation paths; change no message.

    Exactly one of `ids`, `exact`, `semantic` selects. `selector="request"`
    records that a natural-language request was resolved to that selection.
    Side effect: one audit row in status `previewed`. The selection's text is
    used and dropped; it is not stored.
    """
    _validate_mode(mode)
    depth = _validate_depth(depth)
    expire_at = _validate_expire_at(mode, expire_at)
    given = [name for name, value in (("ids", ids), ("exact", exact), ("semantic", semantic)) if value is not None]
    if len(given) != 1:
        raise ValidationFailed(
            "Select messages with exactly one of ids, exact or semantic.", fields={"select": "one selector"}
        )
    kind = given[0]
    if kind != "semantic" and threshold is not None:
        raise ValidationFailed("threshold goes with a semantic selection.", fields={"threshold": "unexpected"})
    if kind == "ids":
        matched = _select_ids(owner=owner, ids=ids)
    elif kind == "exact":
        matched = _select_exact(owner=owner, phrase=exact, mode=mode)
    else:
        threshold = _validate_threshold(threshold)
        matched = _select_semantic(owner=owner, query=semantic, threshold=threshold, mode=mode)
    members = dep_ids(owner_id=owner.pk, roots=matched, depth=depth)
    paths = explanation_paths(owner_id=owner.pk, roots=matched, members=members)
    deletion = DeletionRequest.objects.create(
        owner=owner,
        actor=actor,
        selector=selector or kind,
        resolved_selector=kind,
        threshold=threshold if kind == "semantic" else None,
        mode=mode,
        depth=depth,
        expire_at=expire_at,
        matched_ids=matched,
        dependent_ids=sorted(members - set(matched)),
        explanations={str(node): path for node, path in sorted(paths.items())},
    )
    logger.info("deletion %s previewed: %s matched, %s dependents", deletion.pk, len(matched), len(paths))
    return deletion


def _locked_deletion(*, deletion_id: int, owner_id: int) -> DeletionRequest:
    """Owner lock first, then the row: the same order as every other writer."""
    owner_lock(owner_id)
    deletion = DeletionRequest.objects.select_for_update().filter(pk=deletion_id, owner_id=owner_id).first()
    if deletion is None:
        raise NotFound(f"No deletion with id {deletion_id}.")
    return deletion


def _apply(*, deletion: DeletionRequest, purge: bool) -> ForgetProbe:
    """Recompute Dep(M) and remove it. Caller holds the owner's lock.

    Returns the receipt's forget probe, read before a purge destroys the embeddings.
    """
    members = dep_ids(owner_id=deletion.owner_id, roots=deletion.matched_ids, depth=deletion.depth)
    probe = forget_probe(owner_id=deletion.owner_id, message_ids=members, roots=deletion.matched_ids)
    targets = Message.objects.filter(owner_id=deletion.owner_id, pk__in=members)
    now = timezone.now()
    if purge:
        # The row stays as a tombstone (id, role, timestamps) so the graph and
        # the audit keep their shape; content, embedding and the generated
        # search vector go. VACUUM afterwards reclaims the old tuples.
        removed = list(targets.exclude(status=Message.Status.PURGED).values_list("pk", flat=True))
        targets.filter(pk__in=removed).update(
            status=Message.Status.PURGED,
            content="",
            embedding=None,
            embedding_model="",
            deleted_by_id=deletion.pk,
            expires_at=None,
            updated_at=now,
        )
    else:
        removed = list(targets.filter(status__in=Message.LIVE).values_list("pk", flat=True))
        targets.filter(pk__in=removed).update(
            status=Message.Status.DELETED, deleted_by_id=deletion.pk, expires_at=None, updated_at=now
        )
    deletion.dependent_ids = sorted(members - set(deletion.matched_ids))
    deletion.explanations = {
        str(node): path
        for node, path in sorted(
            explanation_paths(owner_id=deletion.owner_id, roots=deletion.matched_ids, members=members).items()
        )
    }
    deletion.deleted_ids = sorted(removed)
    deletion.executed_at = now
    deletion.status = Status.EXECUTED
    verb = "purged" if purge else "soft-deleted"
    deletion.outcome = (
        f"{verb} {len(removed)} messages ({len(deletion.matched_ids)} matched, "
        f"{len(deletion.dependent_ids)} dependents"
        + (f", taint depth limited to {deletion.depth}" if deletion.depth is not None else "")
        + ")"
    )
    return probe


def deletion_confirm(*, deletion_id: int, owner_id: int, confirmed_by: User) -> DeletionRequest:
    """Execute a previewed deletion (soft, purge) or schedule it (expire).

    In one transaction under the owner's lock: recompute Dep(M) (replies may
    have appeared since the preview) and apply the mode; write the audit row.
    After commit, a purge enqueues a VACUUM and an expire enqueues its timer,
    and an executed deletion is verified (its receipt, `deletion_verify`).
    Confirming an executed or scheduled deletion again returns it unchanged.
    """
    probe = None
    with transaction.atomic():
        deletion = _locked_deletion(deletion_id=deletion_id, owner_id=owner_id)
        if deletion.status in (Status.EXECUTED, Status.SCHEDULED, Status.VERIFICATION_FAILED):
            return deletion
        if deletion.status != Status.PREVIEWED:
            raise Conflict(f"This deletion is {deletion.status}; it can no longer be confirmed.")
        deletion.confirmed_by = confirmed_by
        deletion.confirmed_at = timezone.now()
        if deletion.mode == Mode.EXPIRE:
            assert deletion.expire_at is not None  # the preview requires it for mode expire
            if deletion.expire_at <= deletion.confirmed_at:
                raise Conflict("expire_at has passed since the preview; preview the deletion again.")
            # Only the matched messages are marked: Dep is recomputed when the
            # expiry fires, so replies derived in the meantime go too.
            Message.objects.filter(pk__in=deletion.matched_ids, status__in=Message.LIVE).update(
                status=Message.Status.EXPIRING, expires_at=deletion.expire_at, deleted_by_id=deletion.pk
            )
            deletion.status = Status.SCHEDULED
            deletion.outcome = f"scheduled for {deletion.expire_at.isoformat()}"
        else:
            probe = _apply(deletion=deletion, purge=deletion.mode == Mode.PURGE)
        deletion.save()
        _after_commit(deletion)
    if probe is not None:
        deletion = deletion_verify(deletion_id=deletion.pk, probe=probe)
    logger.info("deletion %s %s: %s messages", deletion.pk, deletion.status, len(deletion.deleted_ids))
    return deletion


def _after_commit(deletion: DeletionRequest) -> None:
    if deletion.status == Status.EXECUTED and deletion.mode != Mode.SOFT and deletion.deleted_ids:
        transaction.on_commit(lambda: vacuum_messages_task.delay())
    if deletion.status == Status.SCHEDULED:
        eta = deletion.expire_at
        assert eta is not None  # every scheduled deletion has its time
        transaction.on_commit(lambda: deletion_fire_task.apply_async(kwargs={"deletion_id": deletion.pk}, eta=eta))


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
        deletion = _locked_deletion(deletion_id=deletion_id, owner_id=owner_id)
        if deletion.status != Status.SCHEDULED:
            return deletion
        assert deletion.expire_at is not None  # every scheduled deletion has its time
        if deletion.expire_at > now:
            return deletion
        probe = _apply(deletion=deletion, purge=True)
        deletion.outcome = f"expired: {deletion.outcome}"
        deletion.save()
        _after_commit(deletion)
    return deletion_verify(deletion_id=deletion.pk, probe=probe)


def deletions_due(*, now: datetime | None = None) -> list[int]:
    """Ids of scheduled expiries whose time has come."""
    now = now or timezone.now()
    return list(
        DeletionRequest.objects.filter(status=Status.SCHEDULED, expire_at__lte=now)
        .order_by("expire_at")
        .values_list("pk", flat=True)
    )


def deletion_cancel(*, deletion_id: int, owner_id: int) -> DeletionRequest:
    """Cancel a preview, or a scheduled expiry before it fires (its messages return to active)."""
    with transaction.atomic():
        deletion = _locked_deletion(deletion_id=deletion_id, owner_id=owner_id)
        if deletion.status == Status.CANCELLED:
            return deletion
        if deletion.status not in (Status.PREVIEWED, Status.SCHEDULED):
            raise Conflict(f"This deletion is {deletion.status}; only a preview or a scheduled one can be cancelled.")
        if deletion.status == Status.SCHEDULED:
            Message.objects.filter(deleted_by_id=deletion.pk, status=Message.Status.EXPIRING).update(
                status=Message.Status.ACTIVE, expires_at=None, deleted_by_id=None
            )
        deletion.status = Status.CANCELLED
        deletion.outcome = "cancelled"
        deletion.save(update_fields=["status", "outcome"])
    return deletion


def deletion_undo(*, deletion_id: int, owner_id: int) -> DeletionRequest:
    """Restore exactly the messages a soft deletion removed.

    Refused (nothing changes) if any of them has since been purged, or if a
    restored message would have a parent that is still removed (I1).
    """
    with transaction.atomic():
        deletion = _locked_deletion(deletion_id=deletion_id, owner_id=owner_id)
        if deletion.status == Status.UNDONE:
            return deletion
        # A soft deletion whose receipt failed still removed its messages; the owner may restore them.
        if deletion.mode != Mode.SOFT or deletion.status not in (Status.EXECUTED, Status.VERIFICATION_FAILED):
            raise Conflict("Only an executed soft deletion can be undone.")
        removed = set(deletion.deleted_ids)
        still = set(
            Message.objects.filter(
                pk__in=removed, deleted_by_id=deletion.pk, status=Message.Status.DELETED
            ).values_list("pk", flat=True)
        )
        if still != removed:
            raise Conflict(
                f"{len(removed - still)} of these messages were purged by a later deletion; this one cannot be undone."
            )
        blocking = (
            Message.objects.filter(out_edges__target_id__in=removed)
            .exclude(pk__in=removed)
            .exclude(status__in=Message.LIVE)
            .values_list("pk", flat=True)
            .distinct()
        )
        blocking_ids = sorted(blocking)
        if blocking_ids:
            raise Conflict(
                "These messages were generated from messages removed by another deletion "
                f"(ids {blocking_ids[:10]}); undo that one first."
            )
        Message.objects.filter(pk__in=removed).update(
            status=Message.Status.ACTIVE, deleted_by_id=None, updated_at=timezone.now()
        )
        deletion.status = Status.UNDONE
        deletion.undone_at = timezone.now()
        deletion.outcome = f"undone: restored {len(removed)} messages"
        deletion.save(update_fields=["status", "undone_at", "outcome"])
    return deletion
