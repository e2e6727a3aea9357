"""Purged words leave the full-text index within a bounded time (issue 13, finding 5).

A GIN index never deletes a key: VACUUM empties the posting list of a purged
message's words but the words themselves stay in the index's entry tree, in
the index file, until the index is rebuilt. `search_index_rebuild` rebuilds it
with `REINDEX INDEX CONCURRENTLY` (reads and writes go on meanwhile) when a
purge has executed since the last rebuild. Beat runs it every
DELLM_SEARCH_SCRUB_INTERVAL seconds, so a purged word is out of the index at
most that long plus one rebuild after its purge; purges in between share one
rebuild (the index is rebuilt at most once per interval, whatever the number
of purges).
"""

import logging

from django.core.cache import cache
from django.db import connection
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from provenance.models import DeletionRequest

logger = logging.getLogger(__name__)

SEARCH_INDEX = "message_search_gin"
_LAST_REBUILD = "search-index-rebuilt-at"
_PURGING = (DeletionRequest.Mode.PURGE, DeletionRequest.Mode.EXPIRE)
_EXECUTED = (DeletionRequest.Status.EXECUTED, DeletionRequest.Status.VERIFICATION_FAILED)


def search_index_rebuild(*, force: bool = False) -> bool:
    """Rebuild the full-text index if a purge executed since the last rebuild; True if it did.

    The time of the last rebuild lives in the cache; without it (a flushed
    cache, a first run) the index is rebuilt, which is safe. Must run outside
    a transaction (REINDEX CONCURRENTLY), as Celery tasks do.
    """
    started = timezone.now()
    last = parse_datetime(cache.get(_LAST_REBUILD) or "")
    purges = DeletionRequest.objects.filter(mode__in=_PURGING, status__in=_EXECUTED)
    if not force and last is not None and not purges.filter(executed_at__gte=last).exists():
        return False
    with connection.cursor() as cursor:
        cursor.execute(f"REINDEX INDEX CONCURRENTLY {SEARCH_INDEX}")
    # The start time: a purge that executed during the rebuild triggers the next one.
    cache.set(_LAST_REBUILD, started.isoformat(), timeout=None)
    logger.info("rebuilt %s in %s ms", SEARCH_INDEX, int((timezone.now() - started).total_seconds() * 1000))
    return True
