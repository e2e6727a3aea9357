"""Removing a deletion's messages: statuses through the writer under the owner's lock, then neighbours' indexes."""

import dataclasses
from collections.abc import Iterable
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chat.facts.rederive import facts_removed
from chat.facts.tasks import facts_rederive_task
from chat.index.context import index_dependents, index_followers
from chat.models import Message
from chat.titles import titles_rederive
from chat.turns.regeneration import regeneration_turns_create
from chat.writer import (
    message_rewrite,
    messages_expiring_mark,
    messages_remove,
)
from chat.writer.vectors import messages_index_embed
from core.db.locks import owner_lock
from core.errors import NotFound
from provenance.deletions.preview import Derived, Mode, Status
from provenance.deletions.receipts import ForgetProbe, deletion_verify, forget_probe, probe_handoff
from provenance.deletions.tasks import deletion_fire_task
from provenance.dependents import dep_ids, explanation_paths
from provenance.erasure.eraser import purge_followups
from provenance.erasure.tasks import erasure_vacuum_task
from provenance.models import DeletionRequest
from provenance.regeneration.replies import regeneration_plan
from provenance.regeneration.tasks import regeneration_run_task


def locked_deletion(*, deletion_id: int, owner_id: int) -> DeletionRequest:
    """Owner lock first, then the row: the same order as every other writer."""
    owner_lock(owner_id)
    deletion = DeletionRequest.objects.select_for_update().filter(pk=deletion_id, owner_id=owner_id).first()
    if deletion is None:
        raise NotFound(f"No deletion with id {deletion_id}.")
    return deletion


def dependents_remove(
    *,
    deletion: DeletionRequest,
    purge: bool,
    replacements: dict[int, str] | None = None,
    then: "VerifyLater | None" = None,
) -> ForgetProbe | None:
    """Recompute Dep(M) and remove it. Caller holds the owner's lock.

    The writer recomputes, in the same transaction, every index built from a
    removed message (chat/index/context.py); they are listed in the probe
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
        deletion.purge_xid = purge_followups(owner_id=deletion.owner_id, message_ids=removed, deletion_id=deletion.pk)
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
        f"{verb} {messages_phrase(len(removed))} ({len(deletion.matched_ids)} matched, "
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
    # A title drawn from a removed message is drawn again from what survives, a replacement included (I3).
    titles_rederive(owner_id=deletion.owner_id, message_ids=removed)
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


def indexes_embed(*, owner_id: int, reindexed: frozenset[int]) -> None:
    """The deletion's follow-up, after its commit and before its receipt: the recomputed indexes get vectors.

    Outside the lock (a model call), batched (`chat.writer.vectors`); an index
    recomputed again meanwhile is left to the write that did it.
    """
    if reindexed:
        messages_index_embed(owner_id=owner_id, ids=reindexed)


@dataclasses.dataclass
class VerifyLater:
    """What the verifying thread does with the probe: the receipt, then what `deletion_confirm` does after it.

    `reindexed`: the indexes the deletion recomputed, filled by `dependents_remove` before
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
        regeneration_start(deletion)


def regeneration_start(deletion: DeletionRequest) -> None:
    """What a deletion rewrites, started after its receipt: replies to regenerate, facts to re-derive."""
    # After the receipt: its forget probe compares neighbours before and right
    # after execution, before any rewritten reply exists. A crash between the
    # commit and this call leaves pending turns, which `deletion_resume` (or
    # `provenance.regenerations_sweep`) picks up.
    if deletion.regenerate_ids:
        regeneration_run_task.delay(deletion_id=deletion.pk, owner_id=deletion.owner_id)
    # Facts it removed that keep live sources are drawn again from those alone (chat/facts/rederive.py).
    if facts := facts_removed(owner_id=deletion.owner_id, ids=deletion.deleted_ids):
        facts_rederive_task.delay(owner_id=deletion.owner_id, fact_ids=facts)


def followups_after_commit(deletion: DeletionRequest) -> None:
    # Only a near expiry gets its own timer: a task with a far eta would sit in
    # the worker's memory, redelivered every visibility timeout, for years.
    # Beat's `deletions_fire_due` (every 30 s) fires the others when due.
    horizon = timedelta(seconds=settings.DELLM_EXPIRY_TIMER_HORIZON)
    if deletion.status == Status.SCHEDULED:
        eta = deletion.expire_at
        assert eta is not None  # every scheduled deletion has its time
        if eta <= timezone.now() + horizon:
            transaction.on_commit(lambda: deletion_fire_task.apply_async(kwargs={"deletion_id": deletion.pk}, eta=eta))


def messages_phrase(count: int) -> str:
    return f"{count} message" if count == 1 else f"{count} messages"


def expiring_again(*, owner_id: int, ids: Iterable[int], cancelled: int | None = None) -> None:
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
