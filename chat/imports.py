"""Importing other tools' chat histories: jobs, and conversations into threads.

Idempotent: an imported thread is keyed by (owner, source, source id) and a
message by (thread, source id), so importing the same file twice adds
nothing, and a conversation that grew since appends only its new messages.
A message the user has deleted since stays deleted (its row still holds the
key), and a new reply after it is skipped: it would derive from removed text.

Atomic per conversation: each conversation lands whole in one transaction
under the owner's lock (sequence numbers, liveness checks), or not at all
and is reported by id and field. DeLLM's own export is one unit, since its
edges cross threads.

Provenance of an imported reply is unknown, so it is recorded conservatively:
an imported reply derives from every earlier message of its conversation
branch (that is what the original model saw), and it is stored only if all
of that is live, the same rule `/v1` follows (both go through
`chat.writer.transcripts_store`). The edges are linear in size: each reply
gets one from every message since the previous reply and one from that
reply, which gives it the same ancestors, hence the same Dep, as an edge
from every earlier message (`chat.lineage`). DeLLM's own export brings its
edges; a message of it lands only if each of its sources is live or lands
too, decided in one pass in topological order (`chat.writer.graph_store`),
and a reply that no edge of the file points at is a chain reply like any
other imported reply. An export re-imported into the account it was taken
from names that account's own rows by id (`_own_rows`): they count as
stored, live or removed, so nothing of it is duplicated and nothing deleted
since comes back, nor anything derived from it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Hashable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import IO, Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import QuerySet
from django.utils import timezone

from chat.import_uploads import UploadGone, upload_open, upload_store
from chat.importers import (
    Conversation,
    ImportedEdge,
    ImportedMessage,
    ImportFormatError,
    Limits,
    Outline,
    ParseResult,
    ZipLimits,
    parse_file,
    sniff_file,
)
from chat.indexing import messages_index_embed
from chat.models import ImportJob, ImportUpload, Message, Thread
from chat.quotas import ImportAllowance, import_admit
from chat.source_keys import stored_keys
from chat.tasks import import_run_task
from chat.writer import Branch, GraphEdge, GraphMessage, Supplied, graph_store, transcripts_store
from dellm_site.errors import DomainError, NotFound, ValidationFailed
from dellm_site.locks import owner_lock
from dellm_site.runs import bounded_runs

logger = logging.getLogger(__name__)

# Conversations whose new messages are embedded in one call: WordLlama's cost
# is per call as much as per text, and 10,000 one-message calls are slow.
EMBED_BATCH = 512
# A list read in outline (the worker's) is read back from the file in
# landing order, at most this many messages and characters of text a pass
# (always one conversation at least): what the worker holds of the file's
# text. A file of DELLM_IMPORT_MAX_MESSAGES long messages takes about a dozen
# passes, each a few seconds of parsing (lab/README.md, import memory).
READ_MESSAGES = 10_000
READ_CHARS = 8_000_000
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


class PayloadTooLarge(DomainError):
    code = "payload_too_large"
    status = 413


def import_limits() -> Limits:
    return Limits(
        max_conversations=settings.DELLM_IMPORT_MAX_CONVERSATIONS,
        max_messages=settings.DELLM_IMPORT_MAX_MESSAGES,
        max_conversation_messages=settings.DELLM_IMPORT_MAX_CONVERSATION_MESSAGES,
        max_message_chars=settings.DELLM_IMPORT_MAX_MESSAGE_CHARS,
        max_edges=settings.DELLM_IMPORT_MAX_EDGES,
        max_conversation_chars=settings.DELLM_IMPORT_MAX_CONVERSATION_CHARS,
    )


def import_zip_limits() -> ZipLimits:
    return ZipLimits(
        max_member_bytes=settings.DELLM_IMPORT_MAX_UNZIPPED_BYTES,
        max_total_bytes=settings.DELLM_IMPORT_MAX_UNZIPPED_BYTES * 4,
    )


def _size(data: bytes | IO[bytes]) -> int:
    if isinstance(data, bytes):
        return len(data)
    data.seek(0, 2)
    size = data.tell()
    data.seek(0)
    return size


def _check_size(data: bytes | IO[bytes]) -> None:
    if _size(data) > settings.DELLM_IMPORT_MAX_BYTES:
        raise PayloadTooLarge(
            f"The file is larger than {settings.DELLM_IMPORT_MAX_BYTES} bytes.", fields={"file": "too large"}
        )


def history_parse(
    *,
    data: bytes | IO[bytes],
    format: str | None = None,
    outline: bool = False,
    reopen: Callable[[], bytes | IO[bytes]] | None = None,
) -> ParseResult:
    """Parse an upload under the configured limits, as a stream; a file that cannot be read is a 400/413.

    `outline`: a ChatGPT or Claude list keeps no messages, and the import
    reads them back a batch at a time, from `reopen()` or else from `data` (`parse_file`).
    """
    _check_size(data)
    try:
        return parse_file(
            data,
            format=format,
            limits=import_limits(),
            zip_limits=import_zip_limits(),
            outline=outline,
            reopen=reopen,
        )
    except ImportFormatError as exc:
        raise ValidationFailed(exc.message, fields={exc.field: exc.message}) from None


def history_sniff(*, data: bytes | IO[bytes], format: str | None = None) -> str | None:
    """The upload's format from its first bytes (None: the job finds it); what they show unreadable is a 400/413."""
    _check_size(data)
    try:
        return sniff_file(data, format=format, limits=import_limits(), zip_limits=import_zip_limits())
    except ImportFormatError as exc:
        raise ValidationFailed(exc.message, fields={exc.field: exc.message}) from None


@dataclass
class ImportProgress:
    """Running counts of one import; ids and numbers only."""

    conversations_total: int = 0
    conversations_done: int = 0
    conversations_failed: int = 0
    messages_total: int = 0
    messages_done: int = 0
    messages_imported: int = 0
    messages_skipped: int = 0
    edges_created: int = 0
    threads: list[int] = field(default_factory=list)
    errors: list[dict[str, str | None]] = field(default_factory=list)


@dataclass
class _Unit:
    conversations: list[Conversation]
    edges: list[ImportedEdge] | None


def _existing(owner_id: int, source: str, conversations: list[Conversation]) -> dict[str, dict[str, tuple[int, str]]]:
    """{conversation source id: {message source id: (id, status)}} of what is already stored.

    That is what an earlier import of the same file stored, and, for DeLLM's
    export of this very account, the rows it was taken from (`_own_rows`).
    """
    found: dict[str, dict[str, tuple[int, str]]] = {c.source_id: {} for c in conversations}
    threads = {thread.pk: key for key, thread in _imported_threads(owner_id, source, list(found)).items()}
    # A purge leaves digests of message keys (chat/source_keys.py): found by digest, known by the file's key.
    stored = {
        c.source_id: stored_keys(owner_id=owner_id, keys=[m.source_id for m in c.messages]) for c in conversations
    }
    rows = Message.objects.filter(owner_id=owner_id, thread_id__in=threads).exclude(source_id="")
    for thread_id, source_id, pk, status in rows.values_list("thread_id", "source_id", "pk", "status"):
        key = threads[thread_id]
        found[key][stored[key].get(source_id, source_id)] = (pk, status)
    for key, own in _own_rows(owner_id, conversations).items():
        found[key].update(own)
    return found


def _own_rows(owner_id: int, conversations: list[Conversation]) -> dict[str, dict[str, tuple[int, str]]]:
    """{conversation: {message key: (id, status)}}: the owner's rows that DeLLM's export names by id.

    An export of this account names its own messages, native or imported,
    live or removed: a purged tombstone keeps its id, thread, seq and role.
    A row counts only if it is the owner's and its thread, seq, role and
    creation time (to the microsecond; the export always gives it) are the
    file's too, so a file of another server or a hand-made one, whose ids
    mean other rows here, matches none of them.
    """
    wanted = {m.exported_id: (c.source_id, m) for c in conversations for m in c.messages if m.exported_id is not None}
    found: dict[str, dict[str, tuple[int, str]]] = {}
    if not wanted:
        return found
    rows = Message.objects.filter(owner_id=owner_id, pk__in=list(wanted)).values_list(
        "pk", "thread_id", "seq", "role", "created_at", "status"
    )
    for pk, thread_id, seq, role, created_at, status in rows:
        key, message = wanted[pk]
        if (thread_id, seq, role, created_at) == (
            message.exported_thread,
            message.order,
            message.role,
            message.created_at,
        ):
            found.setdefault(key, {})[message.source_id] = (pk, status)
    return found


def _imported_threads(owner_id: int, source: str, keys: list[str]) -> dict[str, Thread]:
    """{conversation key: its thread}, matching a purged thread's digested key too (chat/source_keys.py)."""
    stored = stored_keys(owner_id=owner_id, keys=keys)
    rows = Thread.objects.filter(owner_id=owner_id, source=source, source_id__in=list(stored))
    return {stored[thread.source_id]: thread for thread in rows}


def _landing_order(outline: Outline | Conversation) -> tuple[bool, Any]:
    # Exports list the newest conversation first; sequence numbers (and
    # the thread list) should follow the conversations' own order.
    return (outline.created_at is None, outline.created_at or 0)


def _conversations(parsed: ParseResult) -> Iterator[Conversation]:
    """The conversations in the order they land; a list read in outline is read back a batch at a time."""
    if parsed.outlines is None:
        parsed.conversations.sort(key=_landing_order)
        yield from parsed.conversations
        return
    assert parsed.read is not None  # an outline comes with its reader
    in_order = sorted(parsed.outlines, key=_landing_order)
    for batch in bounded_runs(in_order, weigh=lambda o: (o.messages, o.chars), limits=(READ_MESSAGES, READ_CHARS)):
        yield from _read_back(parsed.read, batch)


def _read_back(
    read: Callable[[Collection[int]], dict[int, Conversation]], batch: list[Outline]
) -> Iterator[Conversation]:
    found = read([outline.position for outline in batch])
    for outline in batch:
        # Handed on and forgotten: the batch is held only until its last conversation has landed.
        yield found.pop(outline.position)


def _units(parsed: ParseResult) -> Iterator[list[_Unit]]:
    """Groups of units whose new messages are embedded together, once stored."""
    if parsed.edges is not None:
        yield [_Unit(conversations=parsed.conversations, edges=parsed.edges)]
        return
    group: list[_Unit] = []
    size = 0
    for conversation in _conversations(parsed):
        group.append(_Unit(conversations=[conversation], edges=None))
        size += len(conversation.messages)
        if size >= EMBED_BATCH:
            yield group
            group, size = [], 0
    if group:
        yield group


def history_import(
    *,
    owner_id: int,
    parsed: ParseResult,
    on_progress: Callable[[ImportProgress], None] | None = None,
) -> ImportProgress:
    """Import parsed conversations for one owner; each conversation whole or not at all.

    Side effects, per conversation (per file for DeLLM's export): under the
    owner's lock creates its thread if needed, appends its new messages with
    the next sequence numbers (the writer sets their indexes, as for a chat
    turn), and inserts their provenance edges; then, per group of
    conversations and outside any transaction, embeds the new messages'
    index texts (`chat.indexing.messages_index_embed`). A conversation that fails is
    rolled back and reported in `errors`; the next one goes on. Once one does
    not fit the owner's quotas, it and every later one are reported so
    (`chat.quotas.ImportAllowance`): the import lands a prefix of the file,
    each conversation whole, and importing the file again later adds the rest.
    """
    progress = ImportProgress(
        conversations_total=parsed.conversation_count + len(parsed.errors),
        conversations_failed=len(parsed.errors),
        conversations_done=len(parsed.errors),
        messages_total=parsed.message_count,
        errors=[error.as_dict() for error in parsed.errors],
    )
    if on_progress is not None:
        on_progress(progress)
    seen_threads: set[int] = set()
    allowance = ImportAllowance.start(owner_id=owner_id)
    for group in _units(parsed):
        created: list[int] = []
        for unit in group:
            count = sum(len(c.messages) for c in unit.conversations)
            try:
                done = _unit_commit(owner_id=owner_id, source=parsed.format, unit=unit, allowance=allowance)
            except DomainError as exc:
                name = unit.conversations[0].source_id if len(unit.conversations) == 1 else "the whole export"
                progress.errors.append({"conversation": name, "field": "messages", "message": exc.message})
                progress.conversations_failed += len(unit.conversations)
            else:
                progress.messages_imported += done["imported"]
                progress.messages_skipped += done["skipped"]
                progress.edges_created += done["edges"]
                created += done["created"]
                progress.threads += [t for t in done["threads"] if t not in seen_threads]
                seen_threads.update(done["threads"])
            progress.conversations_done += len(unit.conversations)
            progress.messages_done += count
            if on_progress is not None:
                on_progress(progress)
        messages_index_embed(owner_id=owner_id, ids=created)
    return progress


def _unit_commit(*, owner_id: int, source: str, unit: _Unit, allowance: ImportAllowance) -> dict[str, Any]:
    """One conversation (or DeLLM's whole export) through the writer, under the owner's lock.

    Refused whole (`QuotaExceeded`, nothing stored) if its new messages do not
    fit what is left of the owner's quotas (`chat.quotas.ImportAllowance`).

    The writer decides what lands: an imported reply derives from everything
    before it in its conversation (`chat.writer.transcripts_store`), a
    message of DeLLM's export from its explicit sources (`chat.writer.graph_store`).
    """
    with transaction.atomic():
        with connection.cursor() as cursor:
            # One commit per conversation: waiting for each one's WAL flush
            # was most of an import's time. A crash can lose only the last
            # conversations committed (the WAL keeps their order, so never a
            # later one without an earlier one, nor the job's "done" without
            # them); importing the file again adds exactly those.
            cursor.execute("SET LOCAL synchronous_commit = off")
        owner_lock(owner_id)
        # Re-read under the lock: a concurrent import of the same file may
        # have landed some of these since they were read.
        existing = _existing(owner_id, source, unit.conversations)
        threads: dict[str, int] = {
            key: thread.pk
            for key, thread in _imported_threads(owner_id, source, [c.source_id for c in unit.conversations]).items()
        }
        titles = {c.source_id: c.title for c in unit.conversations}

        def thread_for(key: Hashable) -> int:
            assert isinstance(key, str)  # conversations are keyed by their source id
            if key not in threads:
                title = (titles[key] or f"Imported from {source}")[:200]
                threads[key] = Thread.objects.create(owner_id=owner_id, title=title, source=source, source_id=key).pk
            return threads[key]

        def supplied(conversation: Conversation, message: ImportedMessage) -> Supplied:
            return Supplied(
                role=message.role,
                content=message.text,
                imported_from=source,
                source_id=message.source_id,
                source_created_at=message.source_time,
                tool_calls=[
                    {"id": call_id, "name": name, "arguments": arguments}
                    for call_id, name, arguments in message.tool_calls
                ]
                or None,
                tool_call_id=message.tool_call_id,
            )

        if unit.edges is None:
            branches = []
            for conversation in unit.conversations:
                known = existing[conversation.source_id]
                items: list[int | Supplied] = [
                    known[m.source_id][0] if m.source_id in known else supplied(conversation, m)
                    for m in conversation.messages
                ]
                if any(isinstance(item, Supplied) for item in items):
                    branches.append(Branch(thread_id=thread_for(conversation.source_id), items=items))
            allowance.take(sum(isinstance(item, Supplied) for branch in branches for item in branch.items))
            stored = transcripts_store(owner_id=owner_id, branches=branches)
        else:
            # Conversations interleave in the file: sequence numbers follow its order.
            new = sorted(
                (
                    (m.order or 0, GraphMessage(key=m.source_id, conversation=c.source_id, supplied=supplied(c, m)))
                    for c in unit.conversations
                    for m in c.messages
                    if m.source_id not in existing[c.source_id]
                ),
                key=lambda item: item[0],
            )
            allowance.take(len(new))
            stored = graph_store(
                owner_id=owner_id,
                messages=[message for _, message in new],
                existing={key: row[0] for c in unit.conversations for key, row in existing[c.source_id].items()},
                edges=[GraphEdge(e.source, e.target, e.rank, e.score, e.signal) for e in unit.edges],
                conversations={c.source_id: [m.source_id for m in c.messages] for c in unit.conversations},
                thread_for=thread_for,
            )
    touched = sorted({m.thread_id for m in stored.created})
    return {
        "imported": len(stored.created),
        "skipped": stored.skipped,
        "edges": stored.edges,
        "threads": touched,
        "created": [m.pk for m in stored.created],
    }


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
        # The upload is read from the database a block at a time (chat.import_uploads), a ChatGPT
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
