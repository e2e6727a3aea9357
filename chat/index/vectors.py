"""Per-owner IVFFlat indexes from mid-size histories on, so context retrieval stays fast at 10k and 100k messages.

Exact search reads every one of the owner's vectors: about 1 ms per 1,000
messages here, 175 ms at 100k. A partial index `WHERE owner_id = <id>` holds
only that owner's vectors, so no owner filter runs after the index scan (the
reason a global pgvector 0.6 index returns fewer than k rows), and the
planner picks it for `context_retrieve`'s candidates step because the owner id
reaches the server as a literal (and sorts are priced out: see
VECTOR_INDEX_PLANNING). IVFFlat, not HNSW: on real WordLlama vectors both
find the exact top-10 up to 10k messages (recall 1.0; 0.99 at 30k), but
IVFFlat builds 3-5 times faster, scans whole lists (so soft-deleted rows
cannot starve the top-k, where pgvector 0.6's HNSW returns at most
`ef_search` rows before the filter), and does not get lost among duplicate
vectors (docs/RETRIEVAL.md has the figures, `make bench`'s vector_index part).

The column has no dimension (any embedder), and an IVFFlat index needs one,
so each index is an expression index over `embedding::vector(<dim>)` for one
owner and one embedding model: `... USING ivfflat ((embedding::vector(256))
vector_cosine_ops) WHERE owner_id = 7 AND embedding_model = 'm'`. A query
uses it when it orders by the same cast and filters on the same owner and
model (chat/retrieval/fused.py, chat/retrieval/context.py: `embedding_cast`). While
`manage.py reembed` switches models an owner can have one index per model;
the old model's index goes once its vectors fall below the threshold. When
`chat_message` is hash-partitioned by owner, the index is built on the
owner's partition (chat/partitions.py): a partitioned parent takes no
CREATE INDEX CONCURRENTLY.

Owners below MIN_MESSAGES keep exact search (recall 1.0, and about 2 ms at
that size). Every partial index on a table costs every query on it planning
time (the planner checks each one's predicate): measured, a fused retrieval
plans in 0.27 ms with none, 0.83 ms with 100, 2.1 ms with 300 and 44 ms with
1,000. So a table (or each partition) holds at most MAX_PER_RELATION, the
largest histories' indexes; the others search exactly. The sync builds an
index with about sqrt(n) lists, rebuilds it once the history has grown four
times past that (the centroids were chosen from an older history), and
drops indexes of owners that fell below half the threshold, out of the cap,
or no longer exist. A purge's owner gets theirs rebuilt sooner, by the
eraser's scrub (provenance/erasure): the lists hold copies of the vectors
and the centroids are means of them, purged ones included.
"""

import hashlib
import math
import re
from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import Any, NamedTuple

from django.db import connection
from psycopg import sql

from chat.models import Message
from chat.partitions import is_partitioned, partition_of
from core.db.planning import planned_cursor

INDEX_PREFIX = "message_ivf_owner_"
# From here an index pays: an exact scan of 2,000 vectors takes about 0.5 ms,
# 10,000 about 4 ms; 20 probes of the index find 0.98-0.99 of the exact top-10
# on WordLlama vectors (docs/RETRIEVAL.md, `make bench`'s vector_index part).
MIN_MESSAGES = 2_000
# Indexes on one table or partition, at most: each adds planning time to every
# query on it (the fused retrieval plans in 0.83 ms with 100, 44 ms with 1,000).
MAX_PER_RELATION = 100
# A retrieval query runs with sorts priced out, so that an owner's index is
# used whenever it exists. The planner cannot see how many of an owner's rows
# pass the query's filters: `tool_calls` has no statistics (it holds the
# model's words; chat migration 0002), so `tool_calls IS NULL` is guessed at
# 0.5% of rows, fewer than the query's LIMIT, and then an IVFFlat scan looks as
# dear as reading the whole index: a 5,000-message owner's exact scan (12 ms)
# won over its index (0.9 ms). Every plan of a retrieval query sorts (the exact
# top-N, the ranks, the fusion), so with sorts priced out only the ordered
# index scan changes the choice; an owner without an index keeps the exact plan.
VECTOR_INDEX_PLANNING = {"enable_sort": "off"}
_LISTS = re.compile(r"lists\s*=\s*'?(\d+)")
_DIM = re.compile(r"::vector\((\d+)\)")
# The model in the predicate, as PostgreSQL prints it back: '...'::text, quotes doubled.
_MODEL = re.compile(r"embedding_model\)::text = '((?:[^']|'')*)'::text")


class VectorIndex(NamedTuple):
    owner_id: int
    model: str
    dim: int
    lists: int


def vector_query_cursor(*, probes: int) -> AbstractContextManager[Any]:
    """A cursor for one retrieval query: `probes` IVFFlat lists, sorts priced out (VECTOR_INDEX_PLANNING)."""
    return planned_cursor({"ivfflat.probes": int(probes), **VECTOR_INDEX_PLANNING})


def index_name(owner_id: int, model: str, dim: int) -> str:
    # Model and dimension go into the name as a digest: any model name gives a valid identifier.
    digest = hashlib.sha1(f"{int(dim)}:{model}".encode()).hexdigest()[:10]
    return f"{INDEX_PREFIX}{int(owner_id)}_{digest}"


def embedding_cast(dim: int) -> str:
    """The expression every per-owner index is built on, and a query must order by to use it."""
    return f"embedding::vector({int(dim)})"


# On the table, or on any of its partitions when it is partitioned (each owner's index is on its partition).
_INDEXES_SQL = """
SELECT c.relname, pg_get_indexdef(c.oid)
FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
WHERE c.relname LIKE %(prefix)s
  AND (x.indrelid = to_regclass(%(table)s)
       OR x.indrelid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = to_regclass(%(table)s)))
"""


def vector_indexes() -> list[VectorIndex]:
    """The per-owner, per-model indexes that exist."""
    with connection.cursor() as cursor:
        cursor.execute(_INDEXES_SQL, {"table": Message._meta.db_table, "prefix": f"{INDEX_PREFIX}%"})
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
    # quoted as a literal all the same, never pasted into the statement. On a
    # partitioned table the index goes on the owner's partition: a partitioned
    # parent takes no CREATE INDEX CONCURRENTLY, and the planner, pruning to
    # that partition on the owner id, considers its indexes.
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


Key = tuple[int, str, int]  # (owner id, embedding model, dimension)


def _wanted(counts: dict[Key, int], existing: set[Key], *, min_messages: int, per_relation: int) -> set[Key]:
    """The indexes that should exist: big enough, and the largest `per_relation` of each relation."""
    # An index stays until its history falls below half the threshold (no churn at the boundary).
    eligible = [
        (count, key)
        for key, count in counts.items()
        if count >= min_messages or (key in existing and count >= min_messages // 2)
    ]
    table = Message._meta.db_table
    partitioned = is_partitioned(table)
    ranked: dict[str, list[Key]] = {}
    for _, key in sorted(eligible, key=lambda pair: (-pair[0], pair[1])):
        relation = partition_of(table=table, owner_id=key[0]) if partitioned else table
        ranked.setdefault(relation, []).append(key)
    return {key for keys in ranked.values() for key in keys[:per_relation]}


def owner_vector_index_sync(
    *, min_messages: int = MIN_MESSAGES, owner_ids: list[int] | None = None, per_relation: int = MAX_PER_RELATION
) -> dict:
    """Create, rebuild or drop per-owner indexes; returns {"created": [...], "rebuilt": [...], "dropped": [...]}.

    One index per owner and embedding model (and that model's dimension);
    the lists name owner ids. At most `per_relation` indexes on the table
    (on each partition, when it is partitioned): the largest histories'.
    Outside a transaction the DDL runs CONCURRENTLY (chats go on); inside
    one (tests) it runs plainly. `owner_ids` limits the changes to those
    owners (which owners rank within the cap is decided over all of them).
    """
    concurrently = "" if connection.in_atomic_block else "CONCURRENTLY "
    existing = {(index.owner_id, index.model, index.dim): index for index in vector_indexes()}
    counts = _embedded_counts()
    wanted = _wanted(counts, set(existing), min_messages=min_messages, per_relation=per_relation)
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
            if (owner_id, model, dim) not in wanted:
                if lists is not None:
                    cursor.execute(f"DROP INDEX {concurrently}IF EXISTS {name}")
                    done["dropped"].append(owner_id)
                continue
            if lists is not None and count <= 4 * lists * lists:
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


def vector_literal(vector: Iterable[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"
