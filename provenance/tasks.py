"""Celery tasks for deletion: ids in, nothing out."""

import logging

from celery import shared_task
from django.db import connection

from provenance import services

logger = logging.getLogger(__name__)


@shared_task(name="provenance.deletion_fire")
def deletion_fire(*, deletion_id: int) -> None:
    services.deletion_fire(deletion_id=deletion_id)


@shared_task(name="provenance.deletions_fire_due")
def deletions_fire_due() -> None:
    """Beat's safety net for expiries whose timer task was lost."""
    for deletion_id in services.deletions_due():
        services.deletion_fire(deletion_id=deletion_id)


@shared_task(name="provenance.vacuum_messages")
def vacuum_messages() -> None:
    # A purge UPDATE leaves the old row versions, text included, in the heap
    # until vacuumed. VACUUM cannot run inside a transaction block, and Celery
    # tasks run in Django's autocommit mode.
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE) chat_message")
    logger.info("vacuumed chat_message after a purge")
