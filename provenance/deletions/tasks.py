"""Celery tasks of deletions: fire one, fire the due, sweep receipts (ids only)."""

import logging

from celery import shared_task

from core.task_retry import DATABASE_TRANSIENT, database_retry_options

logger = logging.getLogger(__name__)


@shared_task(name="provenance.deletion_fire", **database_retry_options())
def deletion_fire_task(*, deletion_id: int) -> None:
    from provenance.deletions.expiry import deletion_fire

    deletion_fire(deletion_id=deletion_id)


@shared_task(name="provenance.deletions_fire_due", **database_retry_options())
def deletions_fire_due_task() -> None:
    """Beat's sweep for expiries whose timer task was lost or failed: every overdue one is fired.

    One that fails for a reason other than the database being unavailable is
    logged (ids, exception class) and does not hold back the others; it is
    tried again on the next beat.
    """
    from provenance.deletions.expiry import deletion_fire, deletions_due

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


@shared_task(name="provenance.receipts_sweep", **database_retry_options())
def receipts_sweep_task() -> None:
    """Beat: executed deletions whose receipt never came (their verifying process stopped) get one now."""
    from provenance.deletions.receipts import deletions_unverified_sweep

    swept = deletions_unverified_sweep()
    if swept:
        logger.error("deletions %s: receipts written late, their forget check could not run", swept)
