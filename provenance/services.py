"""Deletion: select M -> preview Dep(M) -> confirm (soft / purge / expire) -> undo or cancel.

Every state change of a deletion goes through one function here, each in its
own transaction, and every one that changes messages runs under the owner's
lock (`dellm_site.locks.owner_lock`), the same lock reply commits take.
Audit rows carry ids, counts and kinds, never message text or query text.
"""

import dataclasses
import logging
import math
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models.functions import Length
from django.utils import timezone
from pgvector.django import CosineDistance

from chat.embeddings import embed_one
from chat.index_context import index_dependents, index_followers
from chat.indexing import messages_index_embed
from chat.models import LIVE_STATUSES, Message, Turn
from chat.services import regeneration_turns_close, regeneration_turns_create, validate_content
from chat.writer import (
    SourcesRemoved,
    message_rewrite,
    messages_expiring_clear,
    messages_expiring_mark,
    messages_remove,
    messages_restore,
)
from dellm_site.budgets import budget_take
from dellm_site.errors import Conflict, NotFound, Throttled, ValidationFailed
from dellm_site.locks import owner_lock
from dellm_site.types import User
from provenance import erasure
from provenance.models import DeletionRequest
from provenance.redaction import Matcher, redact_with_model, redaction_uses_model
from provenance.regeneration import regeneration_plan, regeneration_verify, undo_plan
from provenance.selectors import dep_ids, explanation_paths
from provenance.tasks import deletion_fire_task, erasure_vacuum_task, regeneration_run_task
from provenance.verification import ForgetProbe, deletion_verify, forget_probe, probe_handoff

logger = logging.getLogger(__name__)

Mode = DeletionRequest.Mode
Status = DeletionRequest.Status
Derived = DeletionRequest.Derived
MAX_SELECT_IDS = 10_000


def _validate_derived(derived: object) -> str:
    if derived is None:
        return Derived.DELETE
    if derived not in Derived.values:
        raise ValidationFailed(
            f"Unknown choice for derived replies {derived!r}; use delete or regenerate.", fields={"derived": "unknown"}
        )
    return derived


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
    derived: str | None = None,
    offer_redactions: bool = True,
) -> DeletionRequest:
    """Select M, compute Dep(M) and explanation paths; change no message.

    Exactly one of `ids`, `exact`, `semantic` selects. `selector="request"`
    records that a natural-language request was resolved to that selection.
    `derived` says what happens to the replies in Dep(M) \\ M: `delete` (the
    default) or `regenerate`; `regenerate_ids` lists the replies a regeneration
    would rewrite (one model call each), whichever was chosen.
    Side effect: one audit row in status `previewed`. The selection's text is
    used and dropped; it is not stored. An exact or semantic selection also
    gets `redaction_proposals` (not stored): for each matched user message
    whose matched words sit in part of it, that message without them, within
    the preview's caps (`redactions_unscanned` lists the messages past them).
    With a model configured those are model calls charged to the owner's chat
    budget: Throttled (429), and no audit row, when the budget is spent.
    A caller that shows no redaction (a `/v1` answer, a staff request) passes
    `offer_redactions=False` and spends nothing on them.
    """
    _validate_mode(mode)
    derived = _validate_derived(derived)
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
    paths = explanation_paths(owner_id=owner.pk, roots=matched, depth=depth)
    live_members = set(
        Message.objects.filter(owner=owner, pk__in=members, status__in=Message.LIVE).values_list("pk", flat=True)
    )
    plan = regeneration_plan(
        owner_id=owner.pk, removed=live_members, matched=set(matched), redacted={}, rewrite_matched=kind != "ids"
    )
    # Before the audit row: a preview refused for the chat budget changes nothing.
    proposals, unscanned = (
        _redaction_proposals(owner=owner, matched=matched, exact=exact, semantic=semantic)
        if offer_redactions and kind in ("exact", "semantic") and mode != Mode.EXPIRE
        else ([], [])
    )
    deletion = DeletionRequest.objects.create(
        owner=owner,
        actor=actor,
        selector=selector or kind,
        resolved_selector=kind,
        threshold=threshold if kind == "semantic" else None,
        mode=mode,
        depth=depth,
        expire_at=expire_at,
        derived=derived,
        regenerate_ids=[reply for reply, _, _ in plan],
        matched_ids=matched,
        dependent_ids=sorted(members - set(matched)),
        explanations={str(node): path for node, path in sorted(paths.items())},
    )
    deletion.redaction_proposals = tuple(proposals)
    deletion.redactions_unscanned = tuple(unscanned)
    logger.info("deletion %s previewed: %s matched, %s dependents", deletion.pk, len(matched), len(paths))
    return deletion


def _redaction_proposals(
    *, owner: User, matched: list[int], exact: str | None, semantic: str | None
) -> tuple[list[dict[str, Any]], list[int]]:
    """The redactions on offer, [{"message", "text", "regenerate"}], and the ids of the messages left unscanned.

    Bounded work, all of it in the request: the matched live user messages are
    scanned oldest first while they fit in DELLM_REDACTION_MAX_MESSAGES and
    DELLM_REDACTION_MAX_CHARS (the rest are unscanned: the preview says so, and
    the confirm deletes them whole unless the user sends a text for them); the
    query is prepared once, and each scan is linear in its message. With a
    model configured, each message the rules can redact is one model call,
    taken from the owner's chat budget (the counter of turns and /v1) before
    any is made; the rules' text stands for those the budget cannot cover, and
    a preview that needs one and finds the budget spent is refused (429).
    """
    candidates = (
        Message.objects.filter(owner=owner, pk__in=matched, role=Message.Role.USER, status__in=Message.LIVE)
        .order_by("seq")
        .values_list("pk", Length("content"))
    )
    most_messages, most_chars = settings.DELLM_REDACTION_MAX_MESSAGES, settings.DELLM_REDACTION_MAX_CHARS
    scanned: list[int] = []
    unscanned: list[int] = []
    chars = 0
    for pk, length in candidates:
        # The first message past a cap ends the scan: the scanned ones stay the oldest.
        if not unscanned and len(scanned) < most_messages and chars + length <= most_chars:
            scanned.append(pk)
            chars += length
        else:
            unscanned.append(pk)
    matcher = Matcher(exact=exact, semantic=semantic)
    contents = dict(Message.objects.filter(owner=owner, pk__in=scanned).values_list("pk", "content"))
    by_rules = [(pk, text) for pk in scanned if (text := matcher.redact(contents[pk])) is not None]
    texts = dict(by_rules)
    if by_rules and redaction_uses_model():
        taken, wait = budget_take(user_id=owner.pk, scope="chat", wanted=len(by_rules))
        if not taken:
            raise Throttled(
                "The model writes this preview's redactions, one call each from your chat budget, "
                "and that budget is spent; try again shortly.",
                retry_after=wait,
            )
        topic = exact if exact is not None else semantic or ""
        for pk, _ in by_rules[:taken]:
            texts[pk] = redact_with_model(text=contents[pk], topic=topic) or texts[pk]
        logger.info("redaction preview for owner %s: %s model calls charged", owner.pk, taken)
    proposals = []
    for pk, _ in by_rules:
        members = dep_ids(owner_id=owner.pk, roots=[pk])
        plan = regeneration_plan(
            owner_id=owner.pk, removed=members, matched=set(matched), redacted={pk: None}, rewrite_matched=True
        )
        proposals.append({"message": pk, "text": texts[pk], "regenerate": [reply for reply, _, _ in plan]})
    return proposals, unscanned


def _locked_deletion(*, deletion_id: int, owner_id: int) -> DeletionRequest:
    """Owner lock first, then the row: the same order as every other writer."""
    owner_lock(owner_id)
    deletion = DeletionRequest.objects.select_for_update().filter(pk=deletion_id, owner_id=owner_id).first()
    if deletion is None:
        raise NotFound(f"No deletion with id {deletion_id}.")
    return deletion


def _apply(
    *,
    deletion: DeletionRequest,
    purge: bool,
    replacements: dict[int, str] | None = None,
    then: "_VerifyLater | None" = None,
) -> ForgetProbe | None:
    """Recompute Dep(M) and remove it. Caller holds the owner's lock.

    The writer recomputes, in the same transaction, every index built from a
    removed message (chat/index_context.py); they are listed in the probe
    (`reindexed`) for the follow-up to embed and the receipt to count. Then:
    each redacted original gets its replacement (`replacements`: {original
    id: approved text}), and with `derived="regenerate"` the removed replies
    to rewrite get pending turns. Returns the receipt's forget probe, read
    before a purge destroys the embeddings; or None when `then` is given and a
    thread took the probe over (`probe_handoff`: it reads the same rows and
    calls `then` with it; the recomputed indexes reach it through
    `_verify_later`'s `reindexed`, filled here before the lock is released).
    """
    members = dep_ids(owner_id=deletion.owner_id, roots=deletion.matched_ids, depth=deletion.depth)
    if then is not None:
        probe = probe_handoff(
            deletion_id=deletion.pk,
            owner_id=deletion.owner_id,
            message_ids=members,
            roots=deletion.matched_ids,
            then=then,
        )
    else:
        probe = forget_probe(owner_id=deletion.owner_id, message_ids=members, roots=deletion.matched_ids)
    reindexed = set(index_dependents(owner_id=deletion.owner_id, ids=members)) - members
    originals = {
        message.pk: message
        for message in Message.objects.filter(
            owner_id=deletion.owner_id, pk__in=list(replacements or {}), status__in=Message.LIVE
        )
    }
    removed = messages_remove(owner_id=deletion.owner_id, ids=members, deletion_id=deletion.pk, purge=purge)
    now = timezone.now()
    if purge:
        # Every other place the text lives (provenance/erasure): imports now, vacuum on commit, scrub by beat.
        erasure.purge_followups(owner_id=deletion.owner_id, message_ids=removed, deletion_id=deletion.pk)
    deletion.dependent_ids = sorted(members - set(deletion.matched_ids))
    deletion.explanations = {
        str(node): path
        for node, path in sorted(
            explanation_paths(owner_id=deletion.owner_id, roots=deletion.matched_ids, depth=deletion.depth).items()
        )
    }
    deletion.deleted_ids = sorted(removed)
    deletion.executed_at = now
    deletion.status = Status.EXECUTED
    verb = "purged" if purge else "soft-deleted"
    deletion.outcome = (
        f"{verb} {_messages(len(removed))} ({len(deletion.matched_ids)} matched, "
        f"{len(deletion.dependent_ids)} dependents"
        + (f", taint depth limited to {deletion.depth}" if deletion.depth is not None else "")
        + ")"
    )
    redacted: dict[int, int | None] = {}
    for original_id, text in sorted((replacements or {}).items()):
        if original_id in originals:
            redacted[original_id] = message_rewrite(original=originals[original_id], content=text, embedding=None).pk
    # A replacement's index is new, and so is the one after it (its previous turn is the replacement now).
    replacements_stored = [pk for pk in redacted.values() if pk is not None]
    reindexed |= set(replacements_stored) | set(index_followers(owner_id=deletion.owner_id, ids=replacements_stored))
    deletion.redacted = {str(old): new for old, new in redacted.items()}
    if redacted:
        # A redaction rewrites its dependents: the replies it fed answer the redacted text.
        deletion.derived = Derived.REGENERATE
        deletion.outcome += f"; {len(redacted)} redacted"
    if deletion.derived == Derived.REGENERATE or redacted:
        plan = regeneration_plan(
            owner_id=deletion.owner_id,
            removed=set(removed),
            matched=set(deletion.matched_ids),
            redacted=redacted,
            rewrite_matched=deletion.resolved_selector != DeletionRequest.Selector.IDS,
        )
        regeneration_turns_create(owner_id=deletion.owner_id, deletion_id=deletion.pk, rewrites=plan)
        deletion.regenerate_ids = [reply for reply, _, _ in plan]
        deletion.outcome += f"; {len(plan)} replies to rewrite"
    else:
        deletion.regenerate_ids = []
    if then is not None:
        then.reindexed.update(reindexed)
    return None if probe is None else dataclasses.replace(probe, reindexed=frozenset(reindexed))


def _indexes_embed(*, owner_id: int, reindexed: frozenset[int]) -> None:
    """The deletion's follow-up, after its commit and before its receipt: the recomputed indexes get vectors.

    Outside the lock (a model call), batched (`chat.indexing`); an index
    recomputed again meanwhile is left to the write that did it.
    """
    if reindexed:
        messages_index_embed(owner_id=owner_id, ids=reindexed)


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
    later = _VerifyLater(deletion_id) if verify_later and not transaction.get_connection().in_atomic_block else None
    preview = DeletionRequest.objects.filter(pk=deletion_id, owner_id=owner_id).first()
    if preview is None:
        raise NotFound(f"No deletion with id {deletion_id}.")
    if derived is not None:
        _validate_derived(derived)
    approved = _validate_redactions(owner_id=owner_id, matched=preview.matched_ids, redactions=redactions)
    if approved and preview.mode == Mode.EXPIRE and preview.status == Status.PREVIEWED:
        raise ValidationFailed("Redaction happens at confirm; use mode soft or purge.", fields={"redactions": "expire"})
    with transaction.atomic():
        deletion = _locked_deletion(deletion_id=deletion_id, owner_id=owner_id)
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
            probe = _apply(deletion=deletion, purge=deletion.mode == Mode.PURGE, replacements=approved, then=later)
        deletion.save()
        _after_commit(deletion)
    if probe is not None:
        _indexes_embed(owner_id=deletion.owner_id, reindexed=probe.reindexed)
        deletion = deletion_verify(deletion_id=deletion.pk, probe=probe)
        _regeneration_start(deletion)
    elif later is not None:
        # The receipt is the verifying thread's.
        _indexes_embed(owner_id=deletion.owner_id, reindexed=frozenset(later.reindexed))
    logger.info("deletion %s %s: %s messages", deletion.pk, deletion.status, len(deletion.deleted_ids))
    deletion.refresh_from_db()
    return deletion


@dataclasses.dataclass
class _VerifyLater:
    """What the verifying thread does with the probe: the receipt, then what `deletion_confirm` does after it.

    `reindexed`: the indexes the deletion recomputed, filled by `_apply` before
    the owner's lock is released; the thread reads it after taking that lock.
    """

    deletion_id: int
    reindexed: set[int] = dataclasses.field(default_factory=set)

    def __call__(self, probe: ForgetProbe) -> None:
        # Waits for the owner's lock, so it runs once the deletion has committed (or rolled back: then unchanged).
        probe = dataclasses.replace(probe, reindexed=frozenset(self.reindexed))
        deletion = deletion_verify(deletion_id=self.deletion_id, probe=probe)
        if deletion.status not in (Status.EXECUTED, Status.VERIFICATION_FAILED):
            return  # rolled back, or undone before its receipt: nothing more to do
        if deletion.mode == Mode.PURGE:
            # The thread's snapshot held the purged rows' old versions while it read the probe; the vacuum
            # enqueued on commit may have run meanwhile and had to leave them. This one finds them released.
            erasure_vacuum_task.delay(owner_id=deletion.owner_id)
        _regeneration_start(deletion)


def _regeneration_start(deletion: DeletionRequest) -> None:
    # After the receipt: its forget probe compares neighbours before and right
    # after execution, before any rewritten reply exists. A crash between the
    # commit and this call leaves pending turns, which `deletion_resume` (or
    # `provenance.regenerations_sweep`) picks up.
    if deletion.regenerate_ids:
        regeneration_run_task.delay(deletion_id=deletion.pk, owner_id=deletion.owner_id)


def _after_commit(deletion: DeletionRequest) -> None:
    # Only a near expiry gets its own timer: a task with a far eta would sit in
    # the worker's memory, redelivered every visibility timeout, for years.
    # Beat's `deletions_fire_due` (every 30 s) fires the others when due.
    horizon = timedelta(seconds=settings.DELLM_EXPIRY_TIMER_HORIZON)
    if deletion.status == Status.SCHEDULED:
        eta = deletion.expire_at
        assert eta is not None  # every scheduled deletion has its time
        if eta <= timezone.now() + horizon:
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
        assert probe is not None  # read here: an expiry fires in a worker, not in a request
        deletion.outcome = f"expired: {deletion.outcome}"
        deletion.save()
        _after_commit(deletion)
    _indexes_embed(owner_id=deletion.owner_id, reindexed=probe.reindexed)
    deletion = deletion_verify(deletion_id=deletion.pk, probe=probe)
    _regeneration_start(deletion)
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
        deletion = _locked_deletion(deletion_id=deletion_id, owner_id=owner_id)
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
            _expiring_again(owner_id=owner_id, ids=deletion.matched_ids, cancelled=deletion.pk)
        deletion.status = Status.CANCELLED
        deletion.outcome = "cancelled"
        deletion.save(update_fields=["status", "outcome"])
    return deletion


def _messages(count: int) -> str:
    return f"{count} message" if count == 1 else f"{count} messages"


def undo_check(deletion: DeletionRequest) -> None:
    """Refuse (Conflict) a deletion no undo can restore: only an executed soft deletion can be undone."""
    # A soft deletion whose receipt failed still removed its messages; the owner may restore them.
    if deletion.mode != Mode.SOFT or deletion.status not in (Status.EXECUTED, Status.VERIFICATION_FAILED):
        raise Conflict("Only an executed soft deletion can be undone.")


def _expiring_again(*, owner_id: int, ids: Iterable[int], cancelled: int | None = None) -> None:
    """Mark expiring again the live ones of `ids` that a scheduled expiry (not `cancelled`) matched.

    A message back from an undo, or freed by a cancelled expiry, still goes
    when another scheduled expiry fires: it shows that expiry's time (the
    first one's, `messages_expiring_mark`). Inside the caller's transaction.
    """
    wanted = set(ids)
    if not wanted:
        return
    scheduled = DeletionRequest.objects.filter(
        owner_id=owner_id, mode=Mode.EXPIRE, status=Status.SCHEDULED, matched_ids__overlap=sorted(wanted)
    )
    if cancelled is not None:
        scheduled = scheduled.exclude(pk=cancelled)
    for expiry in scheduled.only("pk", "matched_ids", "expire_at"):
        when = expiry.expire_at
        assert when is not None  # the preview requires it for mode expire
        messages_expiring_mark(
            owner_id=owner_id, ids=wanted & set(expiry.matched_ids), deletion_id=expiry.pk, expires_at=when
        )


def deletion_undo(*, deletion_id: int, owner_id: int) -> DeletionRequest:
    """Restore exactly the messages a soft deletion removed.

    Refused (nothing changes) if any of them has since been purged, or if a
    restored message would have a parent that is still removed (I1).
    """
    with transaction.atomic():
        deletion = _locked_deletion(deletion_id=deletion_id, owner_id=owner_id)
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
        _expiring_again(owner_id=owner_id, ids=removed)
        now = timezone.now()
        deletion.status = Status.UNDONE
        deletion.undone_at = now
        deletion.undo_removed_ids = rewrites
        deletion.outcome = f"undone: restored {_messages(len(removed))}" + (
            f", removed {len(rewrites)} rewritten" if rewrites else ""
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
        deletion = _locked_deletion(deletion_id=deletion_id, owner_id=owner_id)
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
        transaction.on_commit(lambda: _regeneration_start(deletion))
    return deletion
