"""Changing what is stored: import keys and statuses (see `chat.writer`)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.db import connection, transaction
from django.db.models import Case, JSONField, Q, Value, When
from django.utils import timezone

from chat.index.context import index_dependents, index_followers
from chat.models import Message
from chat.source_keys import source_key_digest
from chat.writer.indexes import indexes_refresh
from chat.writer.messages import SourcesRemoved
from core.db.locks import owner_lock

# --- Import keys ---------------------------------------------------------------


def messages_source_keys_digest(*, owner_id: int, ids: Iterable[int]) -> int:
    """Replace the import keys of the owner's messages `ids` by their keyed digests; how many changed.

    A purge's follow-up (`chat.imports.scrub.purged_imports_scrub`, caller holds
    the owner's lock): a key may be text (a JSONL id), and the digest still
    lets a re-import of the same file find the message purged.
    """
    rows = list(
        Message.objects.filter(owner_id=owner_id, pk__in=list(ids)).exclude(source_id="").values_list("pk", "source_id")
    )
    if not rows:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Message._meta.db_table} AS m SET source_id = d.digest "
            "FROM unnest(%s::bigint[], %s::text[]) AS d(id, digest) WHERE m.owner_id = %s AND m.id = d.id",
            [[pk for pk, _ in rows], [source_key_digest(owner_id=owner_id, key=key) for _, key in rows], owner_id],
        )
        return cursor.rowcount


# --- Statuses ------------------------------------------------------------------


def messages_remove(*, owner_id: int, ids: Iterable[int], deletion_id: int, purge: bool) -> list[int]:
    """Remove the owner's messages `ids` for deletion `deletion_id`; the ids whose status changed.

    Soft: live ones become `deleted` (restorable by `messages_restore`).
    Purge: every one not yet purged becomes a content-free tombstone (id,
    role, timestamps stay so the graph and the audit keep their shape;
    content, tool calls, embedding, search vector and index sources go; a VACUUM later
    reclaims the old tuples). Then, in the same transaction, every index
    built from a removed message is recomputed from what is live
    (`indexes_refresh`: the search vector now, the vector dropped until
    `chat.writer.vectors.messages_index_embed` runs). Takes the owner's lock.
    Provenance decides which ids (Dep); this only writes them.
    """
    now = timezone.now()
    with transaction.atomic():
        owner_lock(owner_id)
        targets = Message.objects.filter(owner_id=owner_id, pk__in=list(ids))
        if purge:
            removed = list(targets.exclude(status=Message.Status.PURGED).values_list("pk", flat=True))
            targets.filter(pk__in=removed).update(
                status=Message.Status.PURGED,
                content="",
                # Empty, not null: it stays a tool step (a regeneration never rewrites it), holding no text.
                tool_calls=Case(When(tool_calls__isnull=False, then=Value([], output_field=JSONField())), default=None),
                tool_call_id="",
                embedding=None,
                embedding_model="",
                search=None,
                index_sources=[],
                deleted_by_id=deletion_id,
                expires_at=None,
                updated_at=now,
            )
        else:
            removed = list(targets.filter(status__in=Message.LIVE).values_list("pk", flat=True))
            targets.filter(pk__in=removed).update(
                status=Message.Status.DELETED, deleted_by_id=deletion_id, expires_at=None, updated_at=now
            )
        # Every index built from a removed message, from what is live now
        # (a soft-deleted one's too after a purge: its index must not keep purged words).
        indexes_refresh(owner_id=owner_id, ids=index_dependents(owner_id=owner_id, ids=removed))
    return sorted(removed)


def messages_restore(*, owner_id: int, ids: Iterable[int], deletion_id: int) -> int:
    """Bring back the messages `ids` that deletion `deletion_id` soft-deleted; how many.

    Refused with `SourcesRemoved` (nothing changes) if a message to restore
    derives from one that is not live and not restored with it (rule 1).
    Never brings back a purged message. The restored messages' indexes and
    those of the messages that follow them are recomputed (`indexes_refresh`).
    Takes the owner's lock.
    """
    wanted = set(ids)
    with transaction.atomic():
        owner_lock(owner_id)
        blocking = (
            Message.objects.filter(owner_id=owner_id, out_edges__owner_id=owner_id, out_edges__target_id__in=wanted)
            .exclude(pk__in=wanted)
            .exclude(status__in=Message.LIVE)
            .values_list("pk", flat=True)
            .distinct()
        )
        blocked = set(blocking)
        if blocked:
            raise SourcesRemoved(blocked)
        restoring = Message.objects.filter(
            owner_id=owner_id, pk__in=wanted, deleted_by_id=deletion_id, status=Message.Status.DELETED
        )
        restored = list(restoring.values_list("pk", flat=True))
        restoring.update(status=Message.Status.ACTIVE, deleted_by_id=None, updated_at=timezone.now())
        # Theirs, and the index of each message that follows one of them again.
        indexes_refresh(owner_id=owner_id, ids=restored + index_followers(owner_id=owner_id, ids=restored))
        return len(restored)


def messages_expiring_mark(*, owner_id: int, ids: Iterable[int], deletion_id: int, expires_at: datetime) -> int:
    """Mark the live ones of `ids` expiring (still live) for deletion `deletion_id`; how many. Takes the owner's lock.

    One an earlier expiry marked keeps that mark: a message shows the first expiry that will take it.
    """
    with transaction.atomic():
        owner_lock(owner_id)
        return (
            Message.objects.filter(owner_id=owner_id, pk__in=list(ids))
            .filter(Q(status=Message.Status.ACTIVE) | Q(status=Message.Status.EXPIRING, expires_at__gt=expires_at))
            .update(status=Message.Status.EXPIRING, expires_at=expires_at, deleted_by_id=deletion_id)
        )


def messages_expiring_clear(*, owner_id: int, deletion_id: int) -> int:
    """Return the messages a scheduled expiry marked to active (it was cancelled). Takes the owner's lock."""
    with transaction.atomic():
        owner_lock(owner_id)
        return Message.objects.filter(
            owner_id=owner_id, deleted_by_id=deletion_id, status=Message.Status.EXPIRING
        ).update(status=Message.Status.ACTIVE, expires_at=None, deleted_by_id=None)
