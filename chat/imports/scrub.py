"""After a purge: imported threads and import jobs keep no trace of purged text."""

from django.db.models import Q
from django.utils import timezone

from chat.models import ImportJob, ImportUpload, Message, Thread
from chat.source_keys import source_key_digest
from chat.subjects import FACTS_SOURCE
from chat.threads import NOTES_SOURCE
from chat.writer import (
    messages_source_keys_digest,
)

# --- After a purge (called by the eraser, provenance/erasure/) -------------------

# What an imported thread is called once a purge touched it: its title came from the other tool's export.
IMPORTED_TITLE = "Imported conversation"
PURGED_UPLOAD_ERROR = "A purge erased the uploaded file before it was imported; upload it again."


def purged_imports_scrub(*, owner_id: int, message_ids: list[int]) -> dict[str, int]:
    """Leave no text of purged messages in what their import recorded. Caller holds the owner's lock.

    In the purge's transaction, in order: each of `message_ids` that was
    imported gets its `source_id` replaced by the keyed digest
    (chat/source_keys.py; re-importing the file then finds it purged); each
    imported thread holding one of them gets IMPORTED_TITLE and its key's
    digest; the owner's import jobs that imported into those threads lose
    their file name, and every job's errors that name one of those
    conversations get its key's digest and a field cut to its first name; every
    upload the owner has waiting is deleted, and a job not started yet fails
    with PURGED_UPLOAD_ERROR (a running one has its file in memory already and
    matches digests like any import). Returns counts by kind.
    """
    digested = messages_source_keys_digest(owner_id=owner_id, ids=message_ids)
    thread_ids = sorted(
        set(Message.objects.filter(owner_id=owner_id, pk__in=message_ids).values_list("thread_id", flat=True))
    )
    # The agent notes' and the facts' threads are ours, not imports: their titles and keys hold no text.
    threads = list(
        Thread.objects.filter(owner_id=owner_id, pk__in=thread_ids)
        .exclude(source="")
        .exclude(source=NOTES_SOURCE)
        .exclude(source=FACTS_SOURCE)
    )
    keys = {thread.source_id: source_key_digest(owner_id=owner_id, key=thread.source_id) for thread in threads}
    # The jobs that imported into these threads (their file name), and any job
    # that names one of these conversations in its errors (one that failed it
    # never listed its thread), read before the keys become digests.
    named = Q(threads__overlap=[t.pk for t in threads])
    for key in keys:
        named |= Q(errors__contains=[{"conversation": key}])
    jobs = list(ImportJob.objects.filter(named, owner_id=owner_id)) if threads else []
    for thread in threads:
        Thread.objects.filter(owner_id=owner_id, pk=thread.pk).update(
            title=IMPORTED_TITLE, source_id=keys[thread.source_id]
        )
    for job in jobs:
        # A purged conversation's error keeps our sentence; its key becomes the
        # digest and its field loses everything past the first name (a message key).
        errors = [
            {**error, "conversation": keys[error["conversation"]], "field": str(error.get("field") or "").split(".")[0]}
            if error.get("conversation") in keys
            else error
            for error in job.errors
        ]
        update: dict[str, object] = {"errors": errors}
        if set(job.threads) & {t.pk for t in threads}:
            update["filename"] = ""
        ImportJob.objects.filter(pk=job.pk).update(**update)
    uploads, _ = ImportUpload.objects.filter(job__owner_id=owner_id).delete()
    ImportJob.objects.filter(owner_id=owner_id, status=ImportJob.Status.PENDING).update(
        status=ImportJob.Status.FAILED, error=PURGED_UPLOAD_ERROR, finished_at=timezone.now()
    )
    return {"messages": digested, "threads": len(threads), "jobs": len(jobs), "uploads": uploads}
