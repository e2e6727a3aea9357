"""Per-owner IVFFlat indexes for heavy histories, so context retrieval stays fast at 100k messages.

Exact search reads every one of the owner's vectors: about 1 ms per 1,000
messages here, 175 ms at 100k. A partial index `WHERE owner_id = <id>` holds
only that owner's vectors, so no owner filter runs after the index scan (the
reason a global pgvector 0.6 index returns fewer than k rows), and the
planner picks it for `context_retrieve`'s candidates step because the owner id
reaches the server as a literal. IVFFlat, not HNSW: it builds in seconds,
scans whole lists (so soft-deleted rows cannot starve the top-k), and does not
get lost among duplicate vectors.

Owners below the threshold keep exact search (recall 1.0). The sync builds an
index with about sqrt(n) lists, rebuilds it once the history has grown four
times past that (the centroids were chosen from an older history), and drops
indexes of owners that fell below half the threshold or no longer exist.
"""

import math
import re

from django.db import connection

from chat.models import Message

INDEX_PREFIX = "message_ivf_owner_"
MIN_MESSAGES = 20_000
_LISTS = re.compile(r"lists\s*=\s*'?(\d+)")


def owner_vector_indexes() -> dict[int, int]:
    """{owner id: number of lists} of the per-owner indexes that exist."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s AND indexname LIKE %s",
            [Message._meta.db_table, f"{INDEX_PREFIX}%"],
        )
        rows = cursor.fetchall()
    found = {}
    for name, definition in rows:
        lists = _LISTS.search(definition)
        found[int(name.removeprefix(INDEX_PREFIX))] = int(lists.group(1)) if lists else 0
    return found


def _embedded_counts() -> dict[int, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT owner_id, count(*) FROM {Message._meta.db_table} WHERE embedding IS NOT NULL GROUP BY owner_id"
        )
        return dict(cursor.fetchall())


def owner_vector_index_sync(*, min_messages: int = MIN_MESSAGES, owner_ids: list[int] | None = None) -> dict:
    """Create, rebuild or drop per-owner indexes; returns {"created": [...], "rebuilt": [...], "dropped": [...]}.

    Outside a transaction the DDL runs CONCURRENTLY (chats go on); inside one
    (tests) it runs plainly. `owner_ids` limits the sync to those owners.
    """
    concurrently = "" if connection.in_atomic_block else "CONCURRENTLY "
    existing = owner_vector_indexes()
    counts = _embedded_counts()
    wanted = set(counts) if owner_ids is None else set(owner_ids)
    done: dict[str, list[int]] = {"created": [], "rebuilt": [], "dropped": []}
    with connection.cursor() as cursor:
        for owner_id in sorted(wanted | (set(existing) if owner_ids is None else set())):
            count = counts.get(owner_id, 0)
            name = f"{INDEX_PREFIX}{owner_id}"
            lists = existing.get(owner_id)
            if lists is not None and count < min_messages // 2:
                cursor.execute(f"DROP INDEX {concurrently}IF EXISTS {name}")
                done["dropped"].append(owner_id)
                continue
            if count < min_messages or (lists is not None and count <= 4 * lists * lists):
                continue
            if lists is not None:
                cursor.execute(f"DROP INDEX {concurrently}IF EXISTS {name}")
            cursor.execute(
                f"CREATE INDEX {concurrently}{name} ON {Message._meta.db_table} "
                "USING ivfflat (embedding vector_cosine_ops) "
                f"WITH (lists = {max(1, round(math.sqrt(count)))}) WHERE owner_id = {int(owner_id)}"
            )
            done["rebuilt" if lists is not None else "created"].append(owner_id)
    return done
