"""Import jobs: create, list, run in the worker with progress, sweep the stalled."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import timedelta
from typing import IO, Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from chat.imports.history import ImportProgress, history_import, history_parse, history_sniff
from chat.imports.tasks import import_run_task
from chat.imports.uploads import UploadGone, upload_open, upload_store
from chat.models import ImportJob, ImportUpload
from chat.quotas import import_admit
from core.errors import DomainError, NotFound

logger = logging.getLogger(__name__)
# How often a running job saves its counts (and the SSE stream sees them).
PROGRESS_INTERVAL_S = 0.25
# The counters of an import job that its progress saves (and the stream shows).
PROGRESS_FIELDS = (
    "conversations_total",
    "conversations_done",
    "conversations_failed",
    "messages_total",
    "messages_done",
    "messages_imported",
    "messages_skipped",
    "edges_created",
    "threads",
    "errors",
)


# What an import job keeps of its errors (errors_capped): the file's values,
# which fields and ids are, copied without a bound would ride every progress event.
MAX_ERRORS = 100
MAX_ERROR_CHARS = 200


UPLOAD_GONE = "The uploaded file is gone; upload it again."


# --- Jobs --------------------------------------------------------------------


def import_job_create(
    *, owner: Any, data: bytes | IO[bytes], filename: str = "", format: str | None = None
) -> ImportJob:
    """Check the upload cheaply, store it and a pending job; enqueue the job after commit.

    Only the cheap part runs here (`history_sniff`: the size, a zip's
    headers, the first MiB of the text), so that a file that is plainly not
    an export is refused at once (400, nothing stored) while the request
    builds nothing of the file, and so is an upload the owner's quotas cannot
    take now (`chat.quotas.import_admit`: 413 account full, 429 with
    `Retry-After` when the day's quota is spent; the file's own count is known
    only to the job, which lands whole conversations while they fit). The job parses it (`import_job_run`): what
    only the whole file shows lands in the job's errors, and its format
    (blank here when the first MiB does not tell it) and totals are the
    job's once it runs. The upload waits in the database, not in the task
    payload or Redis, and the job deletes it.
    """
    sniffed = history_sniff(data=data, format=format)
    import_admit(owner_id=owner.pk)
    if not isinstance(data, bytes):
        data.seek(0)
    content = data if isinstance(data, bytes) else data.read()
    with transaction.atomic():
        job = ImportJob.objects.create(owner=owner, format=sniffed or "", filename=filename[:200])
        upload_store(job_id=job.pk, data=content)
        transaction.on_commit(lambda: _enqueue_job(job.pk))
    return job


def _enqueue_job(job_id: int) -> None:
    import_run_task.delay(job_id=job_id)


def import_job_list(*, owner: Any) -> QuerySet[ImportJob]:
    return ImportJob.objects.filter(owner=owner).order_by("-created_at", "-id")


def import_job_get(*, owner: Any, job_id: int) -> ImportJob:
    job = ImportJob.objects.filter(owner=owner, pk=job_id).first()
    if job is None:
        raise NotFound(f"No import with id {job_id}.")
    return job


def import_job_run(*, job_id: int, on_progress: Callable[[ImportJob], None] | None = None) -> ImportJob | None:
    """Run an import job: parse its upload, import, record counts; delete the upload.

    Safe to run twice (a worker lost mid-job hands it on): conversations that
    landed are found by their source ids and skipped. The upload is deleted
    when the job ends, done or failed.
    """
    started = ImportJob.objects.filter(
        pk=job_id, status__in=[ImportJob.Status.PENDING, ImportJob.Status.RUNNING]
    ).update(status=ImportJob.Status.RUNNING, started_at=timezone.now())
    job = ImportJob.objects.filter(pk=job_id).first()
    if job is None or not started:
        return job
    upload = upload_open(job_id=job_id)
    if upload is None:
        return _job_finish(job, error=UPLOAD_GONE)
    # The running counts (one object, updated in place): a job that fails keeps what landed.
    landed: ImportProgress | None = None
    try:
        # The upload is read from the database a block at a time (chat.imports.uploads), a ChatGPT
        # or Claude list once whole for its outline, then, opened again for each pass, a batch of
        # conversations at a time as they land.
        parsed = history_parse(
            data=upload, format=job.format or None, outline=True, reopen=lambda: _upload_again(job_id)
        )
        del upload
        if job.format != parsed.format:
            job.format = parsed.format
            job.save(update_fields=["format"])

        last_saved = 0.0

        def record(progress: ImportProgress, *, final: bool = False) -> None:
            # A row update and a ping per conversation would double a large
            # import's round trips: at most a few per second, and the last.
            nonlocal last_saved, landed
            landed = progress
            if not final and time.monotonic() - last_saved < PROGRESS_INTERVAL_S:
                return
            last_saved = time.monotonic()
            _progress_set(job, progress)
            job.save(update_fields=list(PROGRESS_FIELDS))
            if on_progress is not None:
                on_progress(job)

        record(history_import(owner_id=job.owner_id, parsed=parsed, on_progress=record), final=True)
    except DomainError as exc:
        return _job_finish(job, error=exc.message, landed=landed)
    except UploadGone:
        # Swept while it ran (import_jobs_sweep) or erased by a purge: what landed stays.
        return _job_finish(job, error=UPLOAD_GONE, landed=landed)
    except Exception:
        logger.exception("import %s failed unexpectedly", job_id)
        _job_finish(job, error="Something went wrong during the import; what was imported stays.", landed=landed)
        raise
    return _job_finish(job, error="")


def _upload_again(job_id: int) -> IO[bytes]:
    upload = upload_open(job_id=job_id)
    if upload is None:
        # What landed stays, and importing the file again adds the rest.
        raise UploadGone(job_id)
    return upload


def errors_capped(errors: list[dict[str, str | None]]) -> list[dict[str, str | None]]:
    """At most MAX_ERRORS errors, each value at most MAX_ERROR_CHARS, then one saying how many more.

    Fields and conversation ids come from the file (a node id, a
    conversation id), and the job's errors go out with every progress event.
    """
    kept = [
        {key: value if value is None else _clipped(value) for key, value in error.items()}
        for error in errors[:MAX_ERRORS]
    ]
    if len(errors) > MAX_ERRORS:
        kept.append({"conversation": None, "field": "errors", "message": f"and {len(errors) - MAX_ERRORS} more"})
    return kept


def _clipped(text: str) -> str:
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "\u2026"


def _progress_set(job: ImportJob, progress: ImportProgress) -> None:
    for name in PROGRESS_FIELDS:
        setattr(job, name, getattr(progress, name))
    job.errors = errors_capped(progress.errors)


def _job_finish(job: ImportJob, *, error: str, landed: ImportProgress | None = None) -> ImportJob:
    """End the job and drop its upload; `landed`: the counts of a run that failed, saved with it."""
    fields = ["status", "error", "finished_at"]
    if landed is not None:
        _progress_set(job, landed)
        fields += PROGRESS_FIELDS
    with transaction.atomic():
        ImportUpload.objects.filter(job_id=job.pk).delete()
        job.status = ImportJob.Status.FAILED if error else ImportJob.Status.DONE
        job.error = _clipped(error) if error else error
        job.finished_at = timezone.now()
        job.save(update_fields=fields)
    return job


def import_jobs_sweep(*, older_than_s: float) -> int:
    """Fail jobs stuck past their time (worker gone, queue flushed) and drop their uploads."""
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    stuck = list(
        ImportJob.objects.filter(status__in=[ImportJob.Status.PENDING, ImportJob.Status.RUNNING], created_at__lt=cutoff)
    )
    for job in stuck:
        _job_finish(job, error="The import did not finish in time; upload the file again (nothing is imported twice).")
    return len(stuck)
