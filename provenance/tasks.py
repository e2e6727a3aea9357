"""Celery tasks for deletion: ids in, nothing out.

Tasks are leaves: each imports its service inside its body, so services can
enqueue them (`from provenance.tasks import deletion_fire_task`) without an
import cycle.
"""

import functools
import logging

from celery import Task, shared_task
from django.conf import settings

from dellm_site.task_retry import DATABASE_TRANSIENT, database_retry, database_retry_options

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


@shared_task(name="provenance.receipts_sweep", **database_retry_options())
def receipts_sweep_task() -> None:
    """Beat: executed deletions whose receipt never came (their verifying process stopped) get one now."""
    from provenance.verification import deletions_unverified_sweep

    swept = deletions_unverified_sweep()
    if swept:
        logger.error("deletions %s: receipts written late, their forget check could not run", swept)


@shared_task(name="provenance.erasure_vacuum", **database_retry_options())
def erasure_vacuum_task(*, owner_id: int) -> None:
    """After a purge: its old row versions, text included, leave heap, TOAST and indexes (provenance/erasure)."""
    from provenance.erasure import vacuum

    # VACUUM cannot run inside a transaction block; Celery tasks run in autocommit mode.
    tables = vacuum(owner_id=owner_id)
    # Table names, not arguments: the log filter withholds non-id arguments.
    logger.info(f"vacuumed {', '.join(tables)} after a purge")


@shared_task(name="provenance.erasure_scrub")
def erasure_scrub_task() -> None:
    """Beat: purged words and centroids out of the indexes (provenance/erasure)."""
    from provenance.erasure import scrub

    scrub()


@shared_task(
    name="provenance.regeneration_run", bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None
)
def regeneration_run_task(self: Task, *, deletion_id: int, owner_id: int) -> None:
    """Rewrite a deletion's removed replies one at a time, oldest first, as ordinary turns.

    Each runs through `chat.services.turn_run` (same commit path and SSE
    events as any turn). A transient upstream fault retries this task with
    backoff, resuming at the same turn; any other failure fails that turn
    (listed on the deletion, resumable) and the next one runs. acks_late +
    reject_on_worker_lost: a killed worker hands the rest to another.
    """
    from chat.services import turn_fail, turn_run
    from chat.streams import turn_publish
    from dellm_site.errors import UpstreamFailed
    from provenance.regeneration import regeneration_next

    while (turn_id := regeneration_next(deletion_id=deletion_id, owner_id=owner_id)) is not None:
        try:
            turn_run(
                turn_id=turn_id,
                owner_id=owner_id,
                on_token=functools.partial(_publish_token, turn_id),
                on_rebuild=functools.partial(turn_publish, turn_id, "reset", {}),
                on_running=functools.partial(turn_publish, turn_id, "status", {"status": "running"}),
            )
        except DATABASE_TRANSIENT as exc:
            # As the turn task does: retried with backoff, resuming at the same turn.
            database_retry(self, exc, what=f"regeneration of deletion {deletion_id}")
        except UpstreamFailed as exc:
            retries = self.request.retries
            if exc.transient and retries < settings.DELLM_LLM_MAX_RETRIES:
                logger.warning(
                    "regeneration turn %s: transient upstream fault (%s), retry %s", turn_id, exc.code, retries + 1
                )
                turn_publish(turn_id, "reset", {})
                raise self.retry(countdown=settings.DELLM_RETRY_BACKOFF * 2**retries) from None
            turn_fail(turn_id=turn_id, owner_id=owner_id, error=exc.message)
        except Exception:
            logger.exception("regeneration turn %s failed unexpectedly", turn_id)
            turn_fail(
                turn_id=turn_id,
                owner_id=owner_id,
                error="Something went wrong while rewriting the reply; resume to retry.",
            )
        finally:
            turn_publish(turn_id, "changed", {})


@shared_task(name="provenance.regenerations_sweep", **database_retry_options())
def regenerations_sweep_task() -> None:
    """Beat: regenerations whose task was lost are run again (provenance.regeneration.regenerations_stalled_sweep)."""
    from chat.streams import turn_publish
    from provenance.models import DeletionRequest
    from provenance.regeneration import regenerations_stalled_sweep

    swept = regenerations_stalled_sweep()
    if swept["resumed"] or swept["failed"]:
        logger.warning(
            "stalled regenerations: resumed deletions %s, failed turns %s", swept["resumed"], swept["failed"]
        )
    for turn_id in swept["failed"]:
        turn_publish(turn_id, "changed", {})
    # A sweep over every owner: the one read here that is not by owner (docs/ARCHITECTURE.md, "Partitioned by owner").
    owners = dict(DeletionRequest.objects.filter(pk__in=swept["resumed"]).values_list("pk", "owner_id"))
    for deletion_id in swept["resumed"]:
        regeneration_run_task.delay(deletion_id=deletion_id, owner_id=owners[deletion_id])


def _publish_token(turn_id: int, token: str) -> None:
    from chat.streams import turn_publish

    turn_publish(turn_id, "token", {"text": token})
