"""Celery task of the per-owner vector indexes."""

import logging

from celery import shared_task

from core.task_retry import database_retry_options

logger = logging.getLogger(__name__)


@shared_task(name="chat.vector_indexes_sync", **database_retry_options())
def vector_indexes_sync_task() -> None:
    """Beat, hourly: per-owner vector indexes for heavy histories (chat/index/vectors.py)."""
    from chat.index.vectors import owner_vector_index_sync

    done = owner_vector_index_sync()
    logger.info(
        "vector indexes: %s created, %s rebuilt, %s dropped",
        len(done["created"]),
        len(done["rebuilt"]),
        len(done["dropped"]),
    )
