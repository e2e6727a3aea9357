"""Celery tasks for deletion: ids in, nothing out.

Tasks are leaves: each imports its service inside its body, so services can
enqueue them (`from provenance.tasks import deletion_fire_task`) without an
import cycle.
"""

import logging

from celery import shared_task
from django.db import connection

from dellm_site.task_retry import DATABASE_TRANSIENT, database_retry_options

logger = logging.getLogger(__name__)


@shared_task(name="provenance.deletion_fire", **database_retry_options())
def deletion_fire_task(*, deletion_id: int) -> None:
    from provenance.services import deletion_fire

    deletion_fire(deletion_id=deletion_id)


@shared_task(name="provenance.deletions_fire_due", **database_retry_options())
def deletions_fire_due_task() -> None:
    """Beat's sweep for expiries whose timer task was lost or failed: every overdue one is fired.

    One that fails for a reason other than the database being unavailable is
    logged (ids, exception class) and does not hold back the others; it is
    tried again on the next beat.
    """
    from provenance.services import deletion_fire, deletions_due

    failed = []
    for deletion_id in deletions_due():
        try:
            deletion_fire(deletion_id=deletion_id)
        except DATABASE_TRANSIENT:
            raise
        except Exception:
            logger.exception("deletion %s: overdue expiry failed to fire", deletion_id)
            failed.append(deletion_id)
    if failed:
        logger.error("overdue expiries still scheduled: %s", failed)


@shared_task(name="provenance.vacuum_messages", **database_retry_options())
def vacuum_messages_task() -> None:
    from chat.models import Message

    # A purge UPDATE leaves the old row versions, text included, in the heap
    # until vacuumed. VACUUM cannot run inside a transaction block, and Celery
    # tasks run in Django's autocommit mode.
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM (ANALYZE) {Message._meta.db_table}")
    # A literal line: the log filter withholds non-id arguments.
    logger.info("vacuumed chat_message after a purge")


@shared_task(name="provenance.search_index_scrub")
def search_index_scrub_task() -> None:
    """Beat: drop purged words from the full-text index (provenance/scrub.py)."""
    from provenance.scrub import search_index_rebuild

    search_index_rebuild()
