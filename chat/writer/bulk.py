"""The lab's bulk loaders, for a benchmark database only (see `chat.writer`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connection, transaction

from chat.models import ContextEdge, Message, Turn
from chat.writer.indexes import indexes_refresh

MESSAGES, EDGES = Message._meta.db_table, ContextEdge._meta.db_table
# Rows whose index one statement computes after a COPY.
INDEX_BATCH = 5000

_COPY_TYPES = [
    *("bigint", "integer", "bigint", "bigint", "varchar", "text", "vector", "varchar", "varchar"),
    *("timestamptz", "timestamptz"),
]


def messages_copy(*, copy_cursor: Any, rows: Iterable[tuple[Any, ...]]) -> list[int]:
    """COPY new active messages in binary: `(id, owner_id, thread_id, seq, role, content, embedding,
    embedding_model, created_at)`; `copy_cursor` is a psycopg cursor with pgvector's dumper registered.
    Returns their ids.

    For the seeder: a fresh synthetic history with nothing removed, so every
    source is live (rule 1) by construction; `edges_copy` links it. Their
    indexes are not computed yet: `messages_index_build` does, once the
    table's indexes exist (each row's previous turn is an index look-up).
    """
    ids = []
    with copy_cursor.copy(
        f"COPY {MESSAGES} (id, owner_id, thread_id, seq, role, content, embedding, embedding_model, "
        "status, created_at, updated_at) FROM STDIN (FORMAT BINARY)"
    ) as copy:
        copy.set_types(_COPY_TYPES)
        for *head, created_at in rows:
            ids.append(head[0])
            copy.write_row((*head, Message.Status.ACTIVE.value, created_at, created_at))
    return ids


def messages_index_build(*, owner_id: int, ids: Sequence[int]) -> None:
    """Compute the index (search vector, sources) of the owner's messages loaded by `messages_copy`, as a chat
    turn's (`indexes_refresh`, INDEX_BATCH rows a statement); the loaded vectors are kept."""
    for start in range(0, len(ids), INDEX_BATCH):
        batch = ids[start : start + INDEX_BATCH]
        indexes_refresh(owner_id=owner_id, ids=batch, fresh=batch)


def edges_copy(*, copy_cursor: Any, owner_id: int, rows: Iterable[tuple[int, int, int, float]]) -> None:
    """COPY `(source, target, rank, score)` edges of a history loaded by `messages_copy` (text format)."""
    body = "".join(f"{owner_id}\t{s}\t{t}\t{r}\t{score:.4f}\n" for s, t, r, score in rows)
    with copy_cursor.copy(f"COPY {EDGES} (owner_id, source_id, target_id, rank, score) FROM STDIN") as copy:
        copy.write(body)


def owners_history_delete(*, owner_ids: Sequence[int]) -> None:
    """Delete every edge, turn and message of these owners (raw deletes: millions of rows). Threads stay."""
    with transaction.atomic(), connection.cursor() as cursor:
        for table in (EDGES, Turn._meta.db_table, MESSAGES):
            cursor.execute(f"DELETE FROM {table} WHERE owner_id = ANY(%s)", [list(owner_ids)])
