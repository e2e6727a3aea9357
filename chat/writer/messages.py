"""Storing messages and their edges: the writer's rules 1, 2 and 3 (see `chat.writer`)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max
from django.utils import timezone

from chat.index.context import index_followers
from chat.lineage import sources_landed, transcript_sources
from chat.models import LIVE_STATUSES, ContextEdge, Message, Thread
from chat.writer.indexes import indexes_refresh, message_insert_indexed
from core.batches import bounded_batches
from core.db.locks import owner_lock

# ContextEdge.rank is a smallint.
MAX_RANK = 32767
# Text one INSERT of new messages carries. Django binds on the client, so a
# statement is spelt out whole in the worker, more than once (the query, its
# bytes, libpq's buffer): one conversation of 2,000 long messages in one
# INSERT took the worker past a gigabyte. A vector counts as its literal.
INSERT_CHARS = 2_000_000
_VECTOR_CHARS = 4_000


class SourcesRemoved(Exception):
    """Refused: these messages the write derives from are not live (nothing was written)."""

    def __init__(self, ids: Iterable[int]) -> None:
        self.ids = sorted(ids)
        super().__init__(f"{len(self.ids)} sources are not live")


@dataclass(frozen=True)
class Source:
    """One message a new message derives from: an edge `id -> new message`."""

    id: int
    rank: int = 0
    score: float = 0.0
    signal: str = ""


@dataclass(frozen=True)
class Supplied:
    """A message handed to DeLLM (a transcript's or a file's), not yet stored."""

    role: str
    content: str
    embedding: list[float] | None = None
    # Defaults to the configured model when there is a vector (the lab passes the one under test).
    embedding_model: str | None = None
    imported_from: str = ""
    source_id: str = ""
    source_created_at: datetime | None = None
    # A reply that called tools: [{"id", "name", "arguments"}]; a tool result: the id of the call it answers.
    tool_calls: list[dict[str, str]] | None = None
    tool_call_id: str = ""


@dataclass(frozen=True)
class Branch:
    """A conversation in order: stored messages (ids) and supplied ones, all in one thread."""

    thread_id: int
    items: Sequence[int | Supplied]


@dataclass
class Stored:
    """What `transcripts_store` / `graph_store` wrote: ids, counts."""

    created: list[Message] = field(default_factory=list)
    skipped: int = 0
    edges: int = 0


def _next_seq(owner_id: int) -> int:
    # Under the owner's lock, so two writers cannot read the same maximum.
    current = Message.objects.filter(owner_id=owner_id).aggregate(m=Max("seq"))["m"]
    return (current or 0) + 1


def _next_seq_and_live(owner_id: int, ids: set[int]) -> tuple[int, set[int]]:
    """`_next_seq` and `_live` in one statement (one message's write, under the owner's lock)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT coalesce(max(seq), 0) + 1, ARRAY(SELECT id FROM {Message._meta.db_table} "
            "WHERE owner_id = %(owner)s AND id = ANY(%(ids)s) AND status = ANY(%(live)s)) "
            f"FROM {Message._meta.db_table} WHERE owner_id = %(owner)s",
            {"owner": owner_id, "ids": sorted(ids), "live": LIVE_STATUSES},
        )
        seq, live = cursor.fetchone()
    return seq, set(live)


def _row(*, owner_id: int, thread_id: int, seq: int, supplied: Supplied) -> Message:
    if supplied.role not in Message.Role.values:
        raise ValueError(f"unknown role {supplied.role!r}")
    model = supplied.embedding_model
    if model is None:
        model = settings.DELLM_EMBEDDING_MODEL if supplied.embedding is not None else ""
    return Message(
        owner_id=owner_id,
        thread_id=thread_id,
        seq=seq,
        role=supplied.role,
        content=supplied.content,
        embedding=supplied.embedding,
        embedding_model=model,
        imported_from=supplied.imported_from,
        source_id=supplied.source_id,
        source_created_at=supplied.source_created_at,
        tool_calls=supplied.tool_calls,
        tool_call_id=supplied.tool_call_id,
    )


def _messages_insert(rows: Sequence[Message]) -> list[Message]:
    """`bulk_create` the rows, in statements of at most INSERT_CHARS of text each (all in the caller's transaction)."""
    for batch in bounded_batches(rows, weigh=_insert_chars, limits=(INSERT_CHARS,)):
        Message.objects.bulk_create(batch)
    return list(rows)


def _insert_chars(row: Message) -> tuple[int]:
    return (len(row.content) + (_VECTOR_CHARS if row.embedding is not None else 0),)


def _live(owner_id: int, ids: Iterable[int]) -> set[int]:
    return set(
        Message.objects.filter(owner_id=owner_id, pk__in=set(ids), status__in=Message.LIVE).values_list("pk", flat=True)
    )


def _edges_insert(*, owner_id: int, rows: Sequence[tuple[int, int, int, float, str]]) -> int:
    """Insert `(source, target, rank, score, signal)` edges in one statement; how many were new.

    One `INSERT ... SELECT FROM unnest` instead of a model instance and bound
    row per edge: a whole-history context has hundreds of edges per reply.
    """
    if not rows:
        return 0
    sources, targets, ranks, scores, signals = (list(column) for column in zip(*rows, strict=True))
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {ContextEdge._meta.db_table} (owner_id, source_id, target_id, rank, score, signal) "
            "SELECT %s, e.source_id, e.target_id, e.rank, e.score, e.signal "
            "FROM unnest(%s::bigint[], %s::bigint[], %s::smallint[], %s::float8[], %s::text[]) "
            "AS e(source_id, target_id, rank, score, signal) ON CONFLICT DO NOTHING",
            [owner_id, sources, targets, [min(max(r, 0), MAX_RANK) for r in ranks], scores, signals],
        )
        return cursor.rowcount


def _indexes_store(*, owner_id: int, rows: Sequence[Message]) -> None:
    """The indexes of the owner's new rows stored in bulk (`_row`: none is put in another's place)."""
    new = [row.pk for row in rows]
    indexes_refresh(owner_id=owner_id, ids=new, fresh=new)


def _threads_touch(*, owner_id: int, thread_ids: Iterable[int]) -> None:
    Thread.objects.filter(owner_id=owner_id, pk__in=set(thread_ids)).update(updated_at=timezone.now())


# --- Storing messages --------------------------------------------------------


def message_store(
    *,
    owner_id: int,
    thread_id: int,
    role: str,
    content: str,
    embedding: list[float] | None = None,
    embedding_model: str | None = None,
    sources: Sequence[Source] = (),
    replaces: int | None = None,
    place: int | None = None,
    tool_calls: list[dict[str, str]] | None = None,
    said_at: datetime | None = None,
) -> Message:
    """Store one message with the owner's next sequence number, and an edge from each of `sources`.

    Takes the owner's lock. Refused with `SourcesRemoved` (nothing written)
    if any source is not a live message of the owner (rule 1). A rewrite
    (regenerated reply, redacted message) names the message it `replaces` and
    the `place` it is shown at. A reply in which the model called tools
    carries its `tool_calls`. A fact is dated when its sources were said (`said_at`). Touches the thread's
    `updated_at`.
    """
    supplied = Supplied(
        role=role,
        content=content,
        embedding=embedding,
        embedding_model=embedding_model,
        tool_calls=tool_calls,
        source_created_at=said_at,
    )
    message = _row(owner_id=owner_id, thread_id=thread_id, seq=0, supplied=supplied)
    message.replaces, message.place = replaces, place
    wanted = {source.id for source in sources}
    # No savepoint in a caller's transaction: a refusal writes nothing and is
    # raised once the block is left, so that transaction goes on; an error
    # while writing leaves it to roll back whole.
    with transaction.atomic(savepoint=False):
        owner_lock(owner_id)
        message.seq, live = _next_seq_and_live(owner_id, wanted)
        missing = wanted - live
        if not missing:
            message_insert_indexed(message)
            if place is not None:
                # What now follows a rewrite put in another's place has it as its previous turn.
                followers = set(index_followers(owner_id=owner_id, ids=[message.pk])) - {message.pk}
                indexes_refresh(owner_id=owner_id, ids=followers)
            _edges_insert(
                owner_id=owner_id,
                rows=[(s.id, message.pk, s.rank, s.score, s.signal) for s in sources],
            )
            _threads_touch(owner_id=owner_id, thread_ids=[thread_id])
    if missing:
        raise SourcesRemoved(missing)
    return message


def edges_add(*, owner_id: int, edges: Sequence[tuple[int, Source]]) -> int:
    """Add edges `(target id, source)` to stored messages (a fact drawn again from other messages).

    Under the owner's lock; refused with `SourcesRemoved` (nothing written) unless every target and every
    source is a live message of the owner. More sources only widen Dep (I1). How many edges were new.
    """
    with transaction.atomic(savepoint=False):
        owner_lock(owner_id)
        wanted = {source.id for _, source in edges} | {target for target, _ in edges}
        missing = wanted - _live(owner_id, wanted)
        if not missing:
            return _edges_insert(
                owner_id=owner_id, rows=[(s.id, target, s.rank, s.score, s.signal) for target, s in edges]
            )
    raise SourcesRemoved(missing)


def message_rewrite(*, original: Message, content: str, embedding: list[float] | None) -> Message:
    """A new message with `content` in `original`'s place (same thread and role, shown at its position).

    A redaction's replacement: the user's own words, so it derives from nothing.
    Takes the owner's lock (the deletion removing `original` holds it already).
    """
    return message_store(
        owner_id=original.owner_id,
        thread_id=original.thread_id,
        role=original.role,
        content=content,
        embedding=embedding,
        replaces=original.pk,
        place=original.place or original.seq,
    )


def tool_results_store(*, owner_id: int, call_id: int, results: Sequence[Supplied]) -> list[Message]:
    """Store a client's results for the tool calls of reply `call_id` (rule 3), in order; the new rows.

    A result derives from the call that asked for it, and from nothing else:
    the client's tool saw that call's arguments. Refused with
    `SourcesRemoved` (nothing written) unless `call_id` is a live message of
    the owner; `ValueError` if a result names no call of it (`tool_call_id`),
    or it is not a `tool` message. Each gets a `tool` edge from the call
    (`rank`: the call's index in `tool_calls`). Never embedded here: a tool
    result is not retrieved as memory. Takes the owner's lock; touches the
    thread.
    """
    with transaction.atomic():
        owner_lock(owner_id)
        call = Message.objects.filter(owner_id=owner_id, pk=call_id, status__in=Message.LIVE).first()
        if call is None:
            raise SourcesRemoved([call_id])
        index = {str(item.get("id")): number for number, item in enumerate(call.tool_calls or [])}
        if any(result.role != Message.Role.TOOL or result.tool_call_id not in index for result in results):
            raise ValueError("a tool result answers no call of this reply")
        seq = _next_seq(owner_id)
        rows = _messages_insert(
            [
                _row(owner_id=owner_id, thread_id=call.thread_id, seq=seq + offset, supplied=result)
                for offset, result in enumerate(results)
            ]
        )
        _indexes_store(owner_id=owner_id, rows=rows)
        _edges_insert(
            owner_id=owner_id,
            rows=[(call.pk, row.pk, index[row.tool_call_id], 1.0, ContextEdge.Signal.TOOL.value) for row in rows],
        )
        _threads_touch(owner_id=owner_id, thread_ids=[call.thread_id])
    return rows


def transcripts_store(*, owner_id: int, branches: Sequence[Branch]) -> Stored:
    """Append supplied messages to their conversations; a supplied non-user message is a chain reply.

    Each branch is its conversation in order, stored messages as ids. A
    supplied user message is the user's own words and is stored. A chain
    reply is stored only if every message before it in its branch is live
    and stored (rule 2); otherwise it, and every later chain reply of the
    branch, is skipped. Stored chain replies get linear `transcript` edges
    (`chat.lineage.transcript_sources`; a stored message is a chain reply if
    it has a `transcript` in-edge), `rank` = how many messages lie between
    source and reply. Sequence numbers follow the branches' order. Takes the
    owner's lock; touches the threads that got messages.
    """
    stored = Stored()
    with transaction.atomic():
        owner_lock(owner_id)
        known = {item for branch in branches for item in branch.items if isinstance(item, int)}
        live = _live(owner_id, known)
        chains = set(
            ContextEdge.objects.filter(owner_id=owner_id, target_id__in=known, signal=ContextEdge.Signal.TRANSCRIPT)
            .values_list("target_id", flat=True)
            .distinct()
        )
        seq = _next_seq(owner_id)
        # Per branch: (position, the stored id or the new row, is a chain reply).
        landed: list[list[tuple[int | Message, bool]]] = []
        for branch in branches:
            removed = False
            kept: list[tuple[int | Message, bool]] = []
            for item in branch.items:
                if isinstance(item, int):
                    removed = removed or item not in live
                    kept.append((item, item in chains))
                    continue
                chain = item.role != Message.Role.USER
                if chain and removed:
                    stored.skipped += 1
                    # What came after it saw it: the rest of the branch is tainted too.
                    continue
                row = _row(owner_id=owner_id, thread_id=branch.thread_id, seq=seq, supplied=item)
                seq += 1
                stored.created.append(row)
                kept.append((row, chain))
            landed.append(kept)
        _messages_insert(stored.created)
        _indexes_store(owner_id=owner_id, rows=stored.created)
        rows = []
        for kept in landed:
            ids = [item if isinstance(item, int) else item.pk for item, _ in kept]
            position = {pk: index for index, pk in enumerate(ids)}
            fresh = {item.pk for item, _ in kept if isinstance(item, Message)}
            pairs = transcript_sources([(pk, chain) for pk, (_, chain) in zip(ids, kept, strict=True)])
            rows += [
                (source, target, position[target] - position[source] - 1, 0.0, ContextEdge.Signal.TRANSCRIPT.value)
                for source, target in pairs
                if target in fresh
            ]
        stored.edges = _edges_insert(owner_id=owner_id, rows=rows)
        _threads_touch(owner_id=owner_id, thread_ids=(m.thread_id for m in stored.created))
    return stored


@dataclass(frozen=True)
class GraphMessage:
    """A supplied message with explicit provenance (DeLLM's own export): `key` names it in `GraphEdge`s."""

    key: Hashable
    conversation: Hashable
    supplied: Supplied


@dataclass(frozen=True)
class GraphEdge:
    source: Hashable
    target: Hashable
    rank: int
    score: float
    signal: str = ""


def _chain_pairs(
    conversations: Mapping[Hashable, Sequence[Hashable]], chains: set[Hashable], replies: set[Hashable]
) -> list[tuple[Hashable, Hashable, int]]:
    """`(source, reply, rank)` for `replies`, by `chat.lineage.transcript_sources` with `chains` as chain replies.

    `rank` is how many messages lie between source and reply.
    """
    pairs = []
    for keys in conversations.values():
        pairs += [
            (keys[source], keys[target], target - source - 1)
            for source, target in transcript_sources([(index, key in chains) for index, key in enumerate(keys)])
            if keys[target] in replies
        ]
    return pairs


def graph_store(
    *,
    owner_id: int,
    messages: Sequence[GraphMessage],
    existing: Mapping[Hashable, int],
    edges: Sequence[GraphEdge],
    conversations: Mapping[Hashable, Sequence[Hashable]],
    thread_for: Callable[[Hashable], int],
) -> Stored:
    """Store messages whose sources are given as edges; sequence numbers in `messages`' order.

    A message is stored only if every source is a live stored message
    (`existing`: key -> id) or a message stored here (rule 1), decided in one
    pass in topological order (`chat.lineage.sources_landed`: an unknown
    source stores nothing of it; a cycle raises `ProvenanceCycle`, nothing
    written). A supplied assistant or summary message that no edge points at is a
    chain reply (rule 2): it derives from every message before it in its
    conversation (`conversations`: each one's keys in order, stored and new),
    by linear `transcript` edges as in `transcripts_store`, so it is skipped
    if any of those is removed or skipped. A user or system message that no
    edge points at derives from nothing. `thread_for(conversation)` gives the
    thread of a conversation that gets a message (and is called for no
    other). Edges into `existing` messages are ignored. Takes the owner's lock.
    """
    stored = Stored()
    with transaction.atomic():
        owner_lock(owner_id)
        live_ids = _live(owner_id, existing.values())
        ok: dict[Hashable, bool] = {key: pk in live_ids for key, pk in existing.items()}
        new = {m.key for m in messages if m.key not in existing}
        pointed = {edge.target for edge in edges}
        replies = {
            m.key
            for m in messages
            if m.key in new and m.key not in pointed and m.supplied.role not in (Message.Role.USER, Message.Role.SYSTEM)
        }
        if unplaced := replies - {key for keys in conversations.values() for key in keys}:
            raise ValueError(f"{len(unplaced)} chain replies are in no conversation")
        stored_chains = set(
            ContextEdge.objects.filter(
                owner_id=owner_id, target_id__in=set(existing.values()), signal=ContextEdge.Signal.TRANSCRIPT
            )
            .values_list("target_id", flat=True)
            .distinct()
        )
        chains = replies | {key for key, pk in existing.items() if pk in stored_chains}
        # Stored: linear edges, through the stored chain replies too (they
        # derive from everything before them already).
        edges = [
            *edges,
            *(
                GraphEdge(source, reply, rank, 0.0, ContextEdge.Signal.TRANSCRIPT.value)
                for source, reply, rank in _chain_pairs(conversations, chains, replies)
            ),
        ]
        # Required, not stored: everything before a chain reply is live or lands,
        # as in `transcripts_store` (through the new chain replies only, whose
        # own requirements cover what came before them: still linear).
        needs = [(edge.source, edge.target) for edge in edges]
        needs += [(source, reply) for source, reply, _ in _chain_pairs(conversations, replies, replies)]
        landed = sources_landed(new=new, live={key for key, live in ok.items() if live}, needs=needs)
        seq = _next_seq(owner_id)
        rows: dict[Hashable, Message] = {}
        for message in messages:
            if message.key not in new:
                continue
            if message.key not in landed:
                stored.skipped += 1
                continue
            rows[message.key] = _row(
                owner_id=owner_id, thread_id=thread_for(message.conversation), seq=seq, supplied=message.supplied
            )
            seq += 1
        stored.created = _messages_insert(list(rows.values()))
        _indexes_store(owner_id=owner_id, rows=stored.created)
        ids = {**existing, **{key: row.pk for key, row in rows.items()}}
        stored.edges = _edges_insert(
            owner_id=owner_id,
            rows=[(ids[e.source], ids[e.target], e.rank, e.score, e.signal) for e in edges if e.target in rows],
        )
        _threads_touch(owner_id=owner_id, thread_ids=(m.thread_id for m in stored.created))
    return stored
