"""Celery tasks for deletion: ids in, nothing out.

Tasks are leaves: each imports its service inside its body, so services can
enqueue them (`from provenance.tasks import deletion_fire_task`) without an
import cycle.
"""

import logging

from celery import shared_task
from django.db import connection

logger = logging.getLogger(__name__)


@shared_task(name="provenance.deletion_fire")
def deletion_fire_task(*, deletion_id: int) -> None:
    from provenance.services import deletion_fire

    deletion_fire(deletion_id=deletion_id)


@shared_task(name="provenance.deletions_fire_due")
def deletions_fire_due_task() -> None:
    """Beat's safety net for expiries whose timer task was lost."""
    from provenance.services import deletion_fire, deletions_due

    for deletion_id in deletions_due():
        deletion_fire(deletion_id=deletion_id)


@shared_task(name="provenance.vacuum_messages")
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
