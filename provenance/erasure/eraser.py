"""The eraser: what a purge does beyond its row write, for every place in the registry.

`provenance.deletions.remove` purges rows (content, embedding; the tombstone) and
calls `purge_followups` in the same transaction; the rest follows from the
registry (`provenance/erasure/registry.py`, docs/SECURITY.md in words):

- in the transaction: imported keys become digests, imported titles become
  neutral, file names and error keys go, waiting uploads are deleted
  (`chat.imports.scrub.purged_imports_scrub`);
- on commit: `provenance.erasure_vacuum` vacuums the owner's part of every
  text table, so the old row versions leave heap, TOAST and indexes within
  seconds, unless a snapshot older than the purge is still open somewhere (a
  `pg_dump`, a long report): VACUUM keeps what such a snapshot can see. A purge
  is marked erased (`erased_at`) only by a vacuum that started after every
  older snapshot had closed; beat's `provenance.erasure_vacuum_sweep` vacuums
  again for the purges still waiting, once that is so;
- within DELLM_SEARCH_SCRUB_INTERVAL (beat, `provenance.erasure_scrub`): every
  index registered `REINDEX` is rebuilt where the purging owners' rows are,
  since a GIN index never deletes a key (VACUUM empties a purged word's
  posting list, the word stays in the entry tree) and a btree's freed space
  keeps bytes, and the per-owner vector index of every owner who purged is
  rebuilt, since its centroids are means of vectors that were purged. Purges
  in between share one scrub.

"The owner's part" is the owner's hash partition where a table is
partitioned by `owner_id` (`chat.partitions`), so each step costs one
partition's data, not the installation's; on a table that is not partitioned
it is the whole table. `compact` (`manage.py dellm_compact`) rewrites the
same parts with VACUUM FULL, removing the bytes VACUUM leaves in free space."""

import logging
from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.utils import timezone
from psycopg import sql

from chat.imports.scrub import purged_imports_scrub
from chat.index.vectors import index_name, vector_indexes
from chat.models import FactDecline
from chat.partitions import partition_index, partition_of
from provenance.erasure.registry import TABLES, reindexed, text_tables
from provenance.erasure.tasks import erasure_vacuum_task
from provenance.models import AccountErasure, DeletionRequest

logger = logging.getLogger(__name__)

_PURGING = (DeletionRequest.Mode.PURGE, DeletionRequest.Mode.EXPIRE)
_EXECUTED = (DeletionRequest.Status.EXECUTED, DeletionRequest.Status.VERIFICATION_FAILED)


def purge_followups(*, owner_id: int, message_ids: list[int], deletion_id: int | None) -> int | None:
    """Inside the purge's transaction, after its row write; the caller holds the owner's lock.

    Side effects, in order: no text of the purged messages stays in what
    their import recorded (`purged_imports_scrub`: keys, titles, file names,
    waiting uploads); the facts declined from them go (a decline names a
    subject); on commit, the vacuum of the owner's part of every text table is enqueued.
    Returns the purge's transaction id (`DeletionRequest.purge_xid`); nothing to do, and None, for no
    messages. `deletion_id` is for the log (None: the lab's bench).
    """
    if not message_ids:
        return None
    done = purged_imports_scrub(owner_id=owner_id, message_ids=message_ids)
    # A decline recorded against a purged message would still say what it was about (its subject).
    FactDecline.objects.filter(owner_id=owner_id, source_id__in=message_ids).delete()
    if any(done.values()):
        logger.info(
            "deletion %s: %s imported keys, %s threads, %s import jobs, %s uploads erased",
            deletion_id,
            done["messages"],
            done["threads"],
            done["jobs"],
            done["uploads"],
        )
    transaction.on_commit(lambda: erasure_vacuum_task.delay(owner_id=owner_id))
    return transaction_xid()


def transaction_xid() -> int:
    """The open transaction's id (xid8): a purge's row versions go once every snapshot is newer than it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_xact_id()::text::bigint")
        return int(cursor.fetchone()[0])


# The oldest transaction any open snapshot may still see, as a 64-bit xid: the snapshot xmin and own xid
# of every backend that holds back a vacuum of this database's tables, as PostgreSQL counts them since 14
# (its own and those connected to no database, but not a session of another database on the same server,
# nor a backend running a plain VACUUM, which another vacuum ignores), replication slots and prepared
# transactions. Not this query's own snapshot: its xmin is any database's oldest running transaction, and
# the VACUUM this reading precedes runs outside a transaction. `age()` counts back from the next xid,
# which the snapshot's xmax is; one more is taken off to be safe.
_HORIZON_SQL = """
SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint - 1 - coalesce(max(held), 0) FROM (
    SELECT greatest(age(backend_xmin), age(backend_xid)) FROM pg_stat_activity
    WHERE coalesce(datid, 0) IN (0, (SELECT oid FROM pg_database WHERE datname = current_database()))
      AND pid <> pg_backend_pid() AND pid NOT IN (SELECT pid FROM pg_stat_progress_vacuum)
    UNION ALL SELECT greatest(age(xmin), age(catalog_xmin)) FROM pg_replication_slots
    UNION ALL SELECT age(transaction) FROM pg_prepared_xacts
) AS snapshots(held)
"""


def snapshot_horizon() -> int:
    """Row versions a transaction older than this replaced can be removed now: no open snapshot sees them."""
    with connection.cursor() as cursor:
        cursor.execute(_HORIZON_SQL)
        return int(cursor.fetchone()[0])


def unerased_owners(*, horizon: int | None = None) -> list[int]:
    """Owners with a purge whose old row versions may still be in the heap (`erased_at` null).

    With `horizon`, only those whose purge a vacuum could now remove: older than every open snapshot.
    """
    owners: set[int] = set()
    for model in (DeletionRequest, AccountErasure):
        pending = model.objects.filter(purge_xid__isnull=False, erased_at__isnull=True)
        if horizon is not None:
            pending = pending.filter(purge_xid__lt=horizon)
        owners.update(pending.values_list("owner_id", flat=True))
    return sorted(owners)


def _owner_tables(owner_ids: Iterable[int]) -> list[str]:
    """The relations holding these owners' rows of every text table: their partitions, or the tables."""
    owners = sorted(set(owner_ids))
    return list(dict.fromkeys(partition_of(table=table, owner_id=owner) for table in text_tables() for owner in owners))


def vacuum(*, owner_id: int) -> tuple[list[str], int]:
    """VACUUM (ANALYZE) the owner's part of every table with a text column. Outside a transaction.

    Then marks erased the owner's purges that this vacuum could remove: those older than every snapshot
    open when it started (VACUUM's own horizon can only be newer). Returns the tables and how many purges
    are still waiting for a vacuum after an older snapshot closes.
    """
    tables = _owner_tables([owner_id])
    horizon = snapshot_horizon()
    with connection.cursor() as cursor:
        if not get_user_model().objects.filter(pk=owner_id).exists():
            # An erased account's per-owner vector indexes (their centroids are means of its vectors).
            for index in vector_indexes():
                if index.owner_id == owner_id:
                    name = index_name(index.owner_id, index.model, index.dim)
                    cursor.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name)))
        # INDEX_CLEANUP ON: the table indexes lose the purged versions' entries whatever VACUUM would judge.
        relations = sql.SQL(", ").join(map(sql.Identifier, tables))
        cursor.execute(sql.SQL("VACUUM (ANALYZE, INDEX_CLEANUP ON) {}").format(relations))
    waiting = 0
    for model in (DeletionRequest, AccountErasure):
        pending = model.objects.filter(owner_id=owner_id, purge_xid__isnull=False, erased_at__isnull=True)
        pending.filter(purge_xid__lt=horizon).update(erased_at=timezone.now())
        waiting += pending.count()
    return tables, waiting


def compact(*, owner_ids: Iterable[int]) -> list[str]:
    """VACUUM FULL the owners' part of every text table; returns them. Outside a transaction.

    The free space VACUUM leaves inside pages keeps the bytes of purged rows
    until later rows overwrite them; the rewrite leaves none. It holds an
    ACCESS EXCLUSIVE lock on each relation while it rewrites it: on a
    partitioned table, the owners' partitions only, so only owners who share
    one wait.
    """
    tables = _owner_tables(owner_ids)
    with connection.cursor() as cursor:
        for table in tables:
            # One at a time: each lock is held for its own rewrite only.
            cursor.execute(sql.SQL("VACUUM FULL {}").format(sql.Identifier(table)))
    return tables


def _interrupted_rebuilds(cursor: CursorWrapper) -> list[str]:
    # On the tables of the registry and on their partitions (where a partition's index is rebuilt).
    cursor.execute(
        # On a table partitioned by owner the copies are the partitions' (REINDEX rebuilds each partition's index).
        "SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
        "JOIN pg_class t ON t.oid = x.indrelid WHERE NOT x.indisvalid AND i.relname ~ '_cc(new|old)[0-9]*$' "
        "AND (t.relname = ANY(%(tables)s) OR EXISTS (SELECT FROM pg_inherits h JOIN pg_class p ON p.oid = h.inhparent "
        "WHERE h.inhrelid = t.oid AND p.relname = ANY(%(tables)s)))",
        {"tables": list(TABLES)},
    )
    return [row[0] for row in cursor.fetchall()]


def scrub(*, force: bool = False) -> list[str]:
    """Rebuild the purging owners' part of the text indexes, and their vector indexes; returns what it rebuilt.

    The purges to scrub are the executed ones not scrubbed yet
    (`DeletionRequest.scrubbed_at` null), and the accounts erased since the last scrub
    (`AccountErasure.scrubbed_at` null): [] when there are none. Each
    registered text index is rebuilt where those owners' keys are: the
    owner's partition's index where the table is partitioned by `owner_id`,
    the whole index where it is not (once, however many owners purged). Then
    each of those owners' vector indexes. `force`: every index whole, every
    owner's vector index. First, the half-built copies an interrupted
    rebuild left are dropped. The purges are marked scrubbed after the
    rebuilds: a scrub cut short leaves them for the next, and a purge that
    commits meanwhile is not among them. Outside a transaction (REINDEX
    CONCURRENTLY: chats and searches go on meanwhile), as Celery tasks run.
    """
    started = timezone.now()
    pending = DeletionRequest.objects.filter(
        mode__in=_PURGING, status__in=_EXECUTED, scrubbed_at__isnull=True
    ).values_list("pk", "owner_id")
    purges = dict(pending)
    erased = dict(AccountErasure.objects.filter(scrubbed_at__isnull=True).values_list("pk", "owner_id"))
    owners = set(purges.values()) | set(erased.values())
    if not owners and not force:
        return []
    if force:
        names = [*reindexed(), *sorted(index_name(i.owner_id, i.model, i.dim) for i in vector_indexes())]
    else:
        parts = (partition_index(index=index, owner_id=owner) for index in reindexed() for owner in sorted(owners))
        names = list(dict.fromkeys(parts))
        names += sorted(
            partition_index(index=index_name(i.owner_id, i.model, i.dim), owner_id=i.owner_id)
            for i in vector_indexes()
            if i.owner_id in owners
        )
    with connection.cursor() as cursor:
        for name in _interrupted_rebuilds(cursor):
            # A REINDEX CONCURRENTLY cut short (worker killed, database restart)
            # leaves its half-built copy, invalid, holding text; the next one builds another.
            cursor.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name)))
        for name in names:
            cursor.execute(sql.SQL("REINDEX INDEX CONCURRENTLY {}").format(sql.Identifier(name)))
    DeletionRequest.objects.filter(owner_id__in=owners, pk__in=list(purges)).update(scrubbed_at=timezone.now())
    AccountErasure.objects.filter(pk__in=list(erased)).update(scrubbed_at=timezone.now())
    logger.info(
        "scrubbed %s indexes for %s purges in %s ms",
        len(names),
        len(purges),
        int((timezone.now() - started).total_seconds() * 1000),
    )
    return names
