"""The eraser: what a purge does beyond its row write, for every place in the registry.

`provenance.services` purges rows (content, embedding; the tombstone) and
calls `purge_followups` in the same transaction; the rest follows from the
registry (`provenance/erasure/registry.py`, docs/SECURITY.md in words):

- in the transaction: imported keys become digests, imported titles become
  neutral, file names and error keys go, waiting uploads are deleted
  (`chat.services.purged_imports_scrub`);
- on commit: `provenance.erasure_vacuum` vacuums every text table, so the old
  row versions leave heap, TOAST and indexes within seconds;
- within DELLM_SEARCH_SCRUB_INTERVAL (beat, `provenance.erasure_scrub`): every
  index registered `REINDEX` is rebuilt, since a GIN index never deletes a
  key (VACUUM empties a purged word's posting list, the word stays in the
  entry tree) and a btree's freed space keeps bytes, and the per-owner vector
  index of every owner who purged is rebuilt, since its centroids are means
  of vectors that were purged. Purges in between share one scrub.
"""

import logging

from django.core.cache import cache
from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from psycopg import sql

from chat.services import purged_imports_scrub
from chat.vector_indexes import index_name, vector_indexes
from provenance.erasure.registry import REGISTRY, TABLES, Place, Way, reindexed, text_tables
from provenance.models import DeletionRequest
from provenance.tasks import erasure_vacuum_task

__all__ = ["REGISTRY", "Place", "Way", "purge_followups", "scrub", "vacuum"]

logger = logging.getLogger(__name__)

_LAST_SCRUB = "erasure-scrubbed-at"
_PURGING = (DeletionRequest.Mode.PURGE, DeletionRequest.Mode.EXPIRE)
_EXECUTED = (DeletionRequest.Status.EXECUTED, DeletionRequest.Status.VERIFICATION_FAILED)


def purge_followups(*, owner_id: int, message_ids: list[int], deletion_id: int | None) -> None:
    """Inside the purge's transaction, after its row write; the caller holds the owner's lock.

    Side effects, in order: no text of the purged messages stays in what
    their import recorded (`purged_imports_scrub`: keys, titles, file names,
    waiting uploads); on commit, the vacuum of every text table is enqueued.
    Nothing to do for no messages. `deletion_id` is for the log (None: the lab's bench).
    """
    if not message_ids:
        return
    done = purged_imports_scrub(owner_id=owner_id, message_ids=message_ids)
    if any(done.values()):
        logger.info(
            "deletion %s: %s imported keys, %s threads, %s import jobs, %s uploads erased",
            deletion_id,
            done["messages"],
            done["threads"],
            done["jobs"],
            done["uploads"],
        )
    transaction.on_commit(lambda: erasure_vacuum_task.delay())


def vacuum() -> list[str]:
    """VACUUM (ANALYZE) every table with a text column; returns their names. Outside a transaction."""
    tables = text_tables()
    with connection.cursor() as cursor:
        cursor.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.SQL(", ").join(map(sql.Identifier, tables))))
    return tables


def _interrupted_rebuilds(cursor: CursorWrapper) -> list[str]:
    cursor.execute(
        # On a table partitioned by owner the copies are the partitions' (REINDEX rebuilds each partition's index).
        "SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
        "JOIN pg_class t ON t.oid = x.indrelid LEFT JOIN pg_inherits p ON p.inhrelid = t.oid "
        "WHERE (t.relname = ANY(%(tables)s) "
        "OR p.inhparent IN (SELECT oid FROM pg_class WHERE relname = ANY(%(tables)s))) "
        "AND NOT x.indisvalid AND i.relname ~ '_cc(new|old)[0-9]*$'",
        {"tables": list(TABLES)},
    )
    return [row[0] for row in cursor.fetchall()]


def scrub(*, force: bool = False) -> list[str]:
    """Rebuild the text indexes and purging owners' vector indexes if a purge ran since the last scrub.

    Returns the names of the indexes rebuilt ([] when nothing was purged
    since). `force`: every one, whatever happened. First, the half-built
    copies an interrupted rebuild left are dropped. The time of the last scrub
    lives in the cache; without it (a flushed cache, a first run) everything
    is rebuilt, which is safe. Outside a transaction (REINDEX CONCURRENTLY:
    chats and searches go on meanwhile), as Celery tasks run.
    """
    started = timezone.now()
    last = parse_datetime(cache.get(_LAST_SCRUB) or "")
    purges = DeletionRequest.objects.filter(mode__in=_PURGING, status__in=_EXECUTED)
    owners: set[int] | None = None
    if not force and last is not None:
        owners = set(purges.filter(executed_at__gte=last).values_list("owner_id", flat=True))
        if not owners:
            return []
    names = reindexed() + sorted(
        index_name(index.owner_id, index.model, index.dim)
        for index in vector_indexes()
        if owners is None or index.owner_id in owners
    )
    with connection.cursor() as cursor:
        for name in _interrupted_rebuilds(cursor):
            # A REINDEX CONCURRENTLY cut short (worker killed, database restart)
            # leaves its half-built copy, invalid, holding text; the next one builds another.
            cursor.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name)))
        for name in names:
            cursor.execute(sql.SQL("REINDEX INDEX CONCURRENTLY {}").format(sql.Identifier(name)))
    # The start time: a purge that executed during the rebuild triggers the next one.
    cache.set(_LAST_SCRUB, started.isoformat(), timeout=None)
    logger.info("scrubbed %s indexes in %s ms", len(names), int((timezone.now() - started).total_seconds() * 1000))
    return names
