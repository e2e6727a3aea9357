"""Celery tasks for chat turns: ids in, nothing out (results are ignored).

Tasks are leaves: each imports its service inside its body, so services can
enqueue them (`from chat.tasks import turn_run_task`) without an import cycle.
"""

import logging

from celery import Task, shared_task
from django.conf import settings

from chat.streams import turn_publish
from dellm_site.errors import UpstreamFailed
from dellm_site.task_retry import DATABASE_TRANSIENT, database_retry, database_retry_options

logger = logging.getLogger(__name__)


@shared_task(name="chat.turn_run", bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None)
def turn_run_task(self: Task, *, turn_id: int, owner_id: int) -> None:
    """Generate a turn's reply; transient upstream faults retry with backoff.

    Ids only, like every task (the owner's too: it names the partition that
    holds the turn, docs/ARCHITECTURE.md): a `/v1` client's system prompt is a
    stored message the turn points at (`Turn.system_message`), read by
    `turn_run` from the database.

    acks_late + reject_on_worker_lost: a worker killed mid-turn hands the turn
    to another worker. That is safe because the reply commits atomically and
    only once (the turn leaves pending/running when it commits).
    """
    from chat.services import turn_fail, turn_run
    from chat.turn_tools import turn_tools_drop

    try:
        turn_run(
            turn_id=turn_id,
            owner_id=owner_id,
            on_token=lambda token: turn_publish(turn_id, "token", {"text": token}),
            on_rebuild=lambda: turn_publish(turn_id, "reset", {}),
            on_running=lambda: turn_publish(turn_id, "status", {"status": "running"}),
        )
        # Done or failed for good: a `/v1` client's tools are needed no longer (chat/turn_tools.py).
        turn_tools_drop(turn_id=turn_id)
    except DATABASE_TRANSIENT as exc:
        # The turn cannot even be marked failed now; past its retries the sweep re-runs or fails it.
        database_retry(self, exc, what=f"turn {turn_id}")
    except UpstreamFailed as exc:
        retries = self.request.retries
        if exc.transient and retries < settings.DELLM_LLM_MAX_RETRIES:
            logger.warning("turn %s: transient upstream fault (%s), retry %s", turn_id, exc.code, retries + 1)
            turn_publish(turn_id, "reset", {})
            raise self.retry(countdown=settings.DELLM_RETRY_BACKOFF * 2**retries) from None
        turn_fail(turn_id=turn_id, owner_id=owner_id, error=exc.message)
        turn_tools_drop(turn_id=turn_id)
    except Exception:
        logger.exception("turn %s failed unexpectedly", turn_id)
        turn_fail(
            turn_id=turn_id, owner_id=owner_id, error="Something went wrong while generating the reply; please retry."
        )
        turn_tools_drop(turn_id=turn_id)
        raise
    finally:
        turn_publish(turn_id, "changed", {})


@shared_task(name="chat.turns_sweep", **database_retry_options())
def turns_sweep_task() -> None:
    """Beat: turns stuck pending/running past DELLM_TURN_STUCK_AFTER are re-run, or failed past their attempts."""
    from chat.services import turns_stuck_sweep

    swept = turns_stuck_sweep()
    if swept["rerun"] or swept["failed"]:
        logger.warning("stuck turns: re-ran %s, failed %s", swept["rerun"], swept["failed"])
    for turn_id in swept["failed"]:
        turn_publish(turn_id, "changed", {})


@shared_task(name="chat.vector_indexes_sync", **database_retry_options())
def vector_indexes_sync_task() -> None:
    """Beat, hourly: per-owner vector indexes for heavy histories (chat/vector_indexes.py)."""
    from chat.vector_indexes import owner_vector_index_sync

    done = owner_vector_index_sync()
    logger.info(
        "vector indexes: %s created, %s rebuilt, %s dropped",
        len(done["created"]),
        len(done["rebuilt"]),
        len(done["dropped"]),
    )


@shared_task(name="chat.import_run", acks_late=True, reject_on_worker_lost=True)
def import_run_task(*, job_id: int) -> None:
    """Import an uploaded chat history; progress goes out as counts on the job's channel.

    Takes the job id only: the file waits in the database (chat.ImportUpload)
    and the service deletes it when the job ends.
    """
    from chat.import_events import import_publish
    from chat.imports import import_job_run

    try:
        import_job_run(job_id=job_id, on_progress=lambda job: import_publish(job.pk))
    finally:
        import_publish(job_id)


@shared_task(name="chat.imports_sweep")
def imports_sweep_task() -> None:
    """Beat: fail imports stuck for an hour (worker gone) and delete their uploads."""
    from chat.imports import import_jobs_sweep

    swept = import_jobs_sweep(older_than_s=3600)
    if swept:
        logger.warning("imports: %s stuck jobs marked failed", swept)
