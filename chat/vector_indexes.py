"""Per-owner IVFFlat indexes for heavy histories, so context retrieval stays fast at 100k messages.

Exact search reads every one of the owner's vectors: about 1 ms per 1,000
messages here, 175 ms at 100k. A partial index `WHERE owner_id = <id>` holds
only that owner's vectors, so no owner filter runs after the index scan (the
reason a global pgvector 0.6 index returns fewer than k rows), and the
planner picks it for `context_retrieve`'s candidates step because the owner id
reaches the server as a literal. IVFFlat, not HNSW: it builds in seconds,
scans whole lists (so soft-deleted rows cannot starve the top-k), and does not
get lost among duplicate vectors.

The column has no dimension (any embedder), and an IVFFlat index needs one,
so each index is an expression index over `embedding::vector(<dim>)` for one
owner and one embedding model: `... USING ivfflat ((embedding::vector(256))
vector_cosine_ops) WHERE owner_id = 7 AND embedding_model = 'm'`. A query
uses it when it orders by the same cast and filters on the same owner and
model (chat/retrieval.py, chat/selectors.py: `embedding_cast`). While
`manage.py reembed` switches models an owner can have one index per model;
the old model's index goes once its vectors fall below the threshold.

Owners below the threshold keep exact search (recall 1.0). The sync builds an
index with about sqrt(n) lists, rebuilds it once the history has grown four
times past that (the centroids were chosen from an older history), and drops
indexes of owners that fell below half the threshold or no longer exist. A
purge's owner gets theirs rebuilt sooner, by the eraser's scrub
(provenance/erasure): centroids are means of vectors, purged ones included.
"""

import hashlib
import math
import re
from typing import NamedTuple

from django.db import connection
from psycopg import sql

from chat.models import Message
from chat.partitions import partition_of

INDEX_PREFIX = "message_ivf_owner_"
MIN_MESSAGES = 20_000
_LISTS = re.compile(r"lists\s*=\s*'?(\d+)")
_DIM = re.compile(r"::vector\((\d+)\)")
# The model in the predicate, as PostgreSQL prints it back: '...'::text, quotes doubled.
_MODEL = re.compile(r"embedding_model\)::text = '((?:[^']|'')*)'::text")


class VectorIndex(NamedTuple):
    owner_id: int
    model: str
    dim: int
    lists: int


def index_name(owner_id: int, model: str, dim: int) -> str:
    # Model and dimension go into the name as a digest: any model name gives a valid identifier.
    digest = hashlib.sha1(f"{int(dim)}:{model}".encode()).hexdigest()[:10]
    return f"{INDEX_PREFIX}{int(owner_id)}_{digest}"


def embedding_cast(dim: int) -> str:
    """The expression every per-owner index is built on, and a query must order by to use it."""
    return f"embedding::vector({int(dim)})"


def vector_indexes() -> list[VectorIndex]:
    """The per-owner, per-model indexes that exist."""
    with connection.cursor() as cursor:
        cursor.execute(
            # On the table or, once it is partitioned by owner, on the owner's partition.
            "SELECT indexname, indexdef FROM pg_indexes WHERE indexname LIKE %(prefix)s AND tablename = ANY("
            "ARRAY[%(table)s] || ARRAY(SELECT inhrelid::regclass::text FROM pg_inherits "
            "WHERE inhparent = to_regclass(%(table)s)))",
            {"table": Message._meta.db_table, "prefix": f"{INDEX_PREFIX}%"},
        )
        rows = cursor.fetchall()
    found = []
    for name, definition in rows:
        lists, dim, model = _LISTS.search(definition), _DIM.search(definition), _MODEL.search(definition)
        owner_id = int(name.removeprefix(INDEX_PREFIX).split("_")[0])
        found.append(
            VectorIndex(
                owner_id=owner_id,
                model=model.group(1).replace("''", "'") if model else "",
                dim=int(dim.group(1)) if dim else 0,
                lists=int(lists.group(1)) if lists else 0,
            )
        )
    return found


def owner_vector_indexes() -> dict[int, int]:
    """{owner id: number of lists} of the per-owner indexes that exist (the largest, if several models)."""
    found: dict[int, int] = {}
    for index in vector_indexes():
        found[index.owner_id] = max(found.get(index.owner_id, 0), index.lists)
    return found


def _embedded_counts() -> dict[tuple[int, str, int], int]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT owner_id, embedding_model, vector_dims(embedding), count(*) FROM {Message._meta.db_table} "
            "WHERE embedding IS NOT NULL GROUP BY 1, 2, 3"
        )
        return {(owner, model, dim): count for owner, model, dim, count in cursor.fetchall()}


def _create_sql(*, concurrently: str, owner_id: int, model: str, dim: int, lists: int) -> str:
    # The model name comes from the database (settings wrote it), but it is
    # quoted as a literal all the same, never pasted into the statement.
    statement = sql.SQL(
        "CREATE INDEX {concurrently}{name} ON {table} USING ivfflat (({cast}) vector_cosine_ops) "
        "WITH (lists = {lists}) WHERE owner_id = {owner} AND embedding_model = {model}"
    ).format(
        concurrently=sql.SQL(concurrently),
        name=sql.Identifier(index_name(owner_id, model, dim)),
        # A partial index of one owner's rows belongs on the owner's partition (CONCURRENTLY cannot build on a
        # partitioned table, and the parent's other partitions hold none of them).
        table=sql.Identifier(partition_of(table=Message._meta.db_table, owner_id=owner_id)),
        cast=sql.SQL(embedding_cast(dim)),
        lists=sql.Literal(int(lists)),
        owner=sql.Literal(int(owner_id)),
        model=sql.Literal(model),
    )
    connection.ensure_connection()
    return statement.as_string(connection.connection)


def owner_vector_index_sync(*, min_messages: int = MIN_MESSAGES, owner_ids: list[int] | None = None) -> dict:
    """Create, rebuild or drop per-owner indexes; returns {"created": [...], "rebuilt": [...], "dropped": [...]}.

    One index per owner and embedding model (and that model's dimension);
    the lists name owner ids. Outside a transaction the DDL runs
    CONCURRENTLY (chats go on); inside one (tests) it runs plainly.
    `owner_ids` limits the sync to those owners.
    """
    concurrently = "" if connection.in_atomic_block else "CONCURRENTLY "
    existing = {(index.owner_id, index.model, index.dim): index for index in vector_indexes()}
    counts = _embedded_counts()
    keys = set(counts) | set(existing)
    if owner_ids is not None:
        keys = {key for key in keys if key[0] in owner_ids}
    done: dict[str, list[int]] = {"created": [], "rebuilt": [], "dropped": []}
    with connection.cursor() as cursor:
        for owner_id, model, dim in sorted(keys):
            count = counts.get((owner_id, model, dim), 0)
            name = index_name(owner_id, model, dim)
            found = existing.get((owner_id, model, dim))
            lists = found.lists if found else None
            if lists is not None and count < min_messages // 2:
                cursor.execute(f"DROP INDEX {concurrently}IF EXISTS {name}")
                done["dropped"].append(owner_id)
                continue
            if count < min_messages or (lists is not None and count <= 4 * lists * lists):
                continue
            if lists is not None:
                cursor.execute(f"DROP INDEX {concurrently}IF EXISTS {name}")
            create = _create_sql(
                concurrently=concurrently,
                owner_id=owner_id,
                model=model,
                dim=dim,
                lists=max(1, round(math.sqrt(count))),
            )
            cursor.execute(create)
            # ANALYZE would sample the cast vectors into pg_statistic (provenance/erasure/registry.py).
            cursor.execute(f"ALTER INDEX {name} ALTER COLUMN 1 SET STATISTICS 0")
            done["rebuilt" if lists is not None else "created"].append(owner_id)
    return done
