"""Celery tasks of the eraser: vacuum and scrub after a purge (ids only)."""

import logging

from celery import shared_task

from core.task_retry import database_retry_options

logger = logging.getLogger(__name__)


@shared_task(name="provenance.erasure_vacuum", **database_retry_options())
def erasure_vacuum_task(*, owner_id: int) -> None:
    """After a purge: its old row versions, text included, leave heap, TOAST and indexes (provenance/erasure)."""
    from provenance.erasure.eraser import vacuum

    # VACUUM cannot run inside a transaction block; Celery tasks run in autocommit mode.
    tables, waiting = vacuum(owner_id=owner_id)
    # Table names, not arguments: the log filter withholds non-id arguments.
    logger.info(f"vacuumed {', '.join(tables)} after a purge")
    if waiting:
        logger.info("owner %s: %s purges wait for an older snapshot to close, then a vacuum", owner_id, waiting)


@shared_task(name="provenance.erasure_vacuum_sweep", **database_retry_options())
def erasure_vacuum_sweep_task() -> None:
    """Beat: vacuum again where an older snapshot kept a purge's row versions, once no snapshot that old is open."""
    from provenance.erasure.eraser import snapshot_horizon, unerased_owners

    for owner_id in unerased_owners(horizon=snapshot_horizon()):
        erasure_vacuum_task.delay(owner_id=owner_id)


@shared_task(name="provenance.erasure_scrub")
def erasure_scrub_task() -> None:
    """Beat: purged words and centroids out of the indexes (provenance/erasure)."""
    from provenance.erasure.eraser import scrub

    scrub()
