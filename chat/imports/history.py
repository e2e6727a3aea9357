"""Importing a chat history: parse, find what is new, store each conversation through the writer."""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from django.conf import settings
from django.db import connection, transaction

from chat.imports.formats import (
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
from chat.models import Message, Thread
from chat.quotas import ImportAllowance
from chat.source_keys import stored_keys
from chat.writer import Branch, GraphEdge, GraphMessage, Supplied, graph_store, transcripts_store
from chat.writer.vectors import messages_index_embed
from core.batches import bounded_batches
from core.db.locks import owner_lock
from core.errors import DomainError, ValidationFailed

# Conversations whose new messages are embedded in one call: WordLlama's cost
# is per call as much as per text, and 10,000 one-message calls are slow.
EMBED_BATCH = 512
# A list read in outline (the worker's) is read back from the file in
# landing order, at most this many messages and characters of text a pass
# (always one conversation at least): what the worker holds of the file's
# text. A file of DELLM_IMPORT_MAX_MESSAGES long messages takes about a dozen
# passes, each a few seconds of parsing (lab/HISTORY.md, import memory).
READ_MESSAGES = 10_000
READ_CHARS = 8_000_000


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
    for batch in bounded_batches(in_order, weigh=lambda o: (o.messages, o.chars), limits=(READ_MESSAGES, READ_CHARS)):
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
    index texts (`chat.writer.vectors.messages_index_embed`). A conversation that fails is
    rolled back and reported in `errors`; the next one goes on. Once one does
    not fit the owner's quotas, it and every later one are reported so
    (`chat.quotas.ImportAllowance`): the import lands a prefix of the file,
    each conversation whole, and importing the file again later adds the rest.
    """
    # Facts of DeLLM's export are never copied (chat/imports/formats/dellm.py): counted, done and skipped at once.
    progress = ImportProgress(
        conversations_total=parsed.conversation_count + len(parsed.errors),
        conversations_failed=len(parsed.errors),
        conversations_done=len(parsed.errors),
        messages_total=parsed.message_count + parsed.facts_skipped,
        messages_done=parsed.facts_skipped,
        messages_skipped=parsed.facts_skipped,
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
