"""Celery tasks of imports: run one job, sweep the stalled (ids only)."""

import logging

from celery import shared_task

logger = logging.getLogger(__name__)


@shared_task(name="chat.import_run", acks_late=True, reject_on_worker_lost=True)
def import_run_task(*, job_id: int) -> None:
    """Import an uploaded chat history; progress goes out as counts on the job's channel.

    Takes the job id only: the file waits in the database (chat.ImportUpload)
    and the service deletes it when the job ends.
    """
    from chat.facts.tasks import facts_extract_soon
    from chat.imports.jobs import import_job_run
    from chat.imports.stream import import_publish

    try:
        job = import_job_run(job_id=job_id, on_progress=lambda job: import_publish(job.pk))
    finally:
        import_publish(job_id)
    if job is not None and job.messages_imported:
        # The imported user messages are read for facts in bounded passes (`GET /api/facts/progress/`).
        facts_extract_soon(owner_id=job.owner_id)


@shared_task(name="chat.imports_sweep")
def imports_sweep_task() -> None:
    """Beat: fail imports stuck for an hour (worker gone) and delete their uploads."""
    from chat.imports.jobs import import_jobs_sweep

    swept = import_jobs_sweep(older_than_s=3600)
    if swept:
        logger.warning("imports: %s stuck jobs marked failed", swept)
