"""A message's index: its own words with its conversational context, and the messages it was built from.

Real turns are short and lean on what came before ("Yeah, it was amazing!"),
so a message is indexed with what it needs to be understood: its own words,
the speaker, its date, and the first `INDEX_CONTEXT_WORDS` words of the turn
it follows (the previous live memory message of its thread, in the order the
thread shows: `coalesce(place, seq)`, then `seq`). Its stored `content` stays
exactly the text; only the index (`Message.search`, the full-text vector, own
words weighted 'A' and context 'B'; `Message.embedding`, `index_vector`:
the own words' vector plus a share of the previous turn's) carries the context.

That makes the index a derived artifact: `Message.index_sources` lists the
ids of the messages whose words it holds (the previous turn; empty for the
first turn of a thread and for what is not memory), and the writer recomputes
every index built from a message it removes, restores or puts in a place
(`chat.writer`, docs/subsystems/writer.md, "The index is derived").

The context is computed once, in SQL (`INDEX_ROWS_SQL`): the writer sets the
search vector from it in the same statement, and `chat.writer.vectors` embeds the
previous turn's words it returns, so the two never disagree.
"""

from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import connection
from psycopg import sql

from chat.models import LIVE_STATUSES, Message
from chat.partitions import partition_of
from core.db.planning import planned_cursor

# Words of the previous turn in a message's index (docs/RETRIEVAL.md,
# "Conversational context", has the sweep): enough to name what an elliptical
# reply is about; more let long unrelated turns drown it (48 cost TOFU three
# questions of 150, 12 none).
INDEX_CONTEXT_WORDS = 12

# The previous turn's share of a message's vector (`index_vector`). Measured
# like INDEX_CONTEXT_WORDS (docs/RETRIEVAL.md): on the shipped sets a share
# costs (0.1: one CM paraphrase question, and the PF smoke's semantic-deletion
# trade-off changes; the text run together cost a third of similarity's
# recall), so similarity keeps the own words' vector and the context lives in
# the full-text index. Raise it for chat whose turns lean on the previous one
# (then `manage.py reembed`); the writer and the deletion's follow-up already
# recompute vectors as they do search vectors.
TURN_VECTOR_WEIGHT = 0.0

# Roles whose messages are memory (embedded, retrieved) and so have a context
# and give one. A system prompt or a tool step is neither: its index is its own words.
MEMORY_ROLES = [str(r) for r in (Message.Role.USER, Message.Role.ASSISTANT, Message.Role.SUMMARY, Message.Role.NOTE)]

_TABLE = Message._meta.db_table

# A message's previous turn (and its followers, `_FOLLOWERS_SQL`) is one row
# read from its thread's index in order (message_thread_seq backwards,
# message_thread_place). Where the planner's statistics lag behind the rows
# (a transaction's own inserts, an owner who grew since the last ANALYZE) it
# took the owner's few rows to be cheaper sorted, by message_owner_status_seq,
# and read the owner's whole history for every message: 4.9 ms a message in a
# 5,000-message history (0.06 ms with this), and a 30,000-message thread's
# index took minutes per 5,000 rows. With sorts priced out the ordered read
# is the only cheap plan.
LOOKUP_PLANNING = {"enable_sort": "off"}


def lookup_cursor() -> AbstractContextManager[Any]:
    """A cursor for the statements that read previous turns (INDEX_ROWS_SQL, `_FOLLOWERS_SQL`): LOOKUP_PLANNING."""
    return planned_cursor(LOOKUP_PLANNING)


# A live memory message with words (`q`): one that gives a context.
_MEMORY_LIVE = (
    "q.owner_id = %(owner)s AND q.status = ANY(%(live)s) AND q.role = ANY(%(memory)s)"
    " AND q.content <> '' AND q.tool_calls IS NULL"
)

# What a row `m` (thread_id, place, seq, role, content, tool_calls,
# source_created_at, created_at) takes from its previous turn `p`: the
# select list's expressions and the join that finds `p`, for a stored row
# (INDEX_ROWS_SQL) or one being stored (`chat.writer`, in its INSERT). The
# previous turn, in the order the thread shows (coalesce(place, seq), then
# seq), is the later of two index look-ups: the messages shown at their own
# seq (`message_thread_seq`) and the rewrites shown at another's place
# (`message_thread_place`, partial). The date is the message's time in its
# source (an import keeps the other tool's) or here, in UTC, in English words
# ("1 December 2026"), so the same conversation typed or imported gets the
# same index.
# Whether `m` takes a context at all, inside the look-ups too: the planner then skips them for a row that does
# not (a fact, a tool step), instead of walking its thread back to the first memory message (none, in the
# facts thread: every earlier fact read again for each new one).
_GIVES_CONTEXT = "m.role = ANY(%(memory)s) AND m.content <> '' AND m.tool_calls IS NULL"
INDEX_SOURCES_SQL = "CASE WHEN p.id IS NULL THEN ARRAY[]::bigint[] ELSE ARRAY[p.id] END"
INDEX_CONTEXT_SQL = """CASE WHEN m.role = ANY(%(memory)s) AND m.content <> '' AND m.tool_calls IS NULL
       THEN concat_ws(' ',
           m.role,
           to_char(coalesce(m.source_created_at, m.created_at) AT TIME ZONE 'UTC', 'FMDD FMMonth YYYY'),
           p.words
       ) ELSE '' END"""
PREVIOUS_TURN_JOIN_SQL = f"""LEFT JOIN LATERAL (
    SELECT cand.id, array_to_string((regexp_split_to_array(btrim(cand.content), '\\s+'))[1:%(words)s], ' ') AS words
    FROM (
        -- Messages shown at their own seq: (seq, seq) before m's (coalesce(place, seq), seq), by message_thread_seq.
        (SELECT q.id, q.content, q.seq AS k1, q.seq AS k2 FROM {_TABLE} q
         WHERE {_GIVES_CONTEXT} AND q.thread_id = m.thread_id AND q.place IS NULL AND {_MEMORY_LIVE}
           AND q.seq <= coalesce(m.place, m.seq) AND (q.seq < coalesce(m.place, m.seq) OR m.place IS NOT NULL)
         ORDER BY q.seq DESC LIMIT 1)
        UNION ALL
        -- Rewrites shown at another's place (few), by message_thread_place.
        (SELECT q.id, q.content, q.place, q.seq FROM {_TABLE} q
         WHERE {_GIVES_CONTEXT} AND q.thread_id = m.thread_id AND q.place IS NOT NULL AND {_MEMORY_LIVE}
           AND (q.place, q.seq) < (coalesce(m.place, m.seq), m.seq)
         ORDER BY q.place DESC, q.seq DESC LIMIT 1)
    ) cand
    ORDER BY cand.k1 DESC, cand.k2 DESC
    LIMIT 1
) p ON m.role = ANY(%(memory)s) AND m.content <> '' AND m.tool_calls IS NULL"""

# The context of each message of %(ids)s of the owner %(owner)s (every read
# names the owner: the planner reads its partition alone) that is not purged.
INDEX_ROWS_SQL = f"""
SELECT m.id, m.content, m.index_sources,
       {INDEX_SOURCES_SQL} AS sources,
       {INDEX_CONTEXT_SQL} AS context,
       coalesce(p.words, '') AS turn
FROM {_TABLE} m
{PREVIOUS_TURN_JOIN_SQL}
WHERE m.owner_id = %(owner)s AND m.id = ANY(%(ids)s) AND m.status <> 'purged'
"""


def index_params(*, owner_id: int, ids: Iterable[int]) -> dict[str, Any]:
    """The parameters of `INDEX_ROWS_SQL` for these message ids of the owner."""
    return {
        "owner": owner_id,
        "ids": sorted(set(ids)),
        "memory": MEMORY_ROLES,
        "live": LIVE_STATUSES,
        "words": INDEX_CONTEXT_WORDS,
    }


@dataclass(frozen=True)
class IndexRow:
    """What a message's index is built from, as the history stands now."""

    id: int
    content: str
    # What its search vector holds besides its own words (weight 'B'): speaker, date, previous turn.
    context: str
    # The previous turn's first words alone.
    turn: str
    sources: list[int]
    # What the row holds now (differs from `sources` until the writer recomputes it).
    stored_sources: list[int]


def index_vector(own: list[float] | None, turn: list[float] | None) -> list[float] | None:
    """A message's index vector: its own words' unit vector plus `TURN_VECTOR_WEIGHT` times its previous turn's.

    A weighted sum, not the embedding of the words run together: with a
    mean-pooling embedder that would weigh the context by its length, and the
    speaker and date (in every message) would pull all vectors together
    (docs/RETRIEVAL.md, "Conversational context", has both measurements).
    """
    if own is None or turn is None:
        return own
    summed = np.asarray(own, dtype=np.float64) + TURN_VECTOR_WEIGHT * np.asarray(turn, dtype=np.float64)
    norm = float(np.linalg.norm(summed))
    return own if norm == 0 else (summed / norm).astype(np.float32).tolist()


def index_rows(*, owner_id: int, ids: Iterable[int]) -> list[IndexRow]:
    """The current index inputs of the owner's messages `ids` that are not purged, by id."""
    with lookup_cursor() as cursor:
        # Sorted here: with sorts priced out an ORDER BY m.id read the owner's rows in id order (8 ms for one message).
        cursor.execute(INDEX_ROWS_SQL, index_params(owner_id=owner_id, ids=ids))
        return [
            IndexRow(
                id=pk, content=content, context=context, turn=turn, sources=list(sources), stored_sources=list(stored)
            )
            for pk, content, stored, sources, context, turn in sorted(cursor.fetchall())
        ]


# The owner's messages in %(statuses)s whose index holds any of %(ids)s: one
# look-up of the owner's partition's message_index_sources_gin per id (`@>`).
# The look-up names the partition and nothing but the array, so the GIN
# index is its only plan: as one `&&` of the whole list, or with the owner's
# condition beside it, the planner compared each of the owner's rows with
# every id (5 s for the 10,000 of a large purge; 35 ms this way, 1 ms for one
# id). The owner is filtered after it; the ids themselves are left out in
# Python, since a `NOT (id = ANY(...))` here is not hashed and compared every
# row found with every id (another 380 ms for those 10,000).
_HOLDING_SQL = """
SELECT DISTINCT h.id FROM unnest(%(ids)s::bigint[]) AS r(id)
CROSS JOIN LATERAL (
    SELECT m.id, m.owner_id, m.status FROM {part} m WHERE m.index_sources @> ARRAY[r.id] OFFSET 0
) h
WHERE h.owner_id = %(owner)s AND h.status = ANY(%(statuses)s)
"""
_NOT_PURGED = [str(s) for s in Message.Status if s != Message.Status.PURGED]


def holding_sql(owner_id: int) -> str:
    """_HOLDING_SQL on the owner's part of the message table (chat.partitions)."""
    part = sql.Identifier(partition_of(table=_TABLE, owner_id=owner_id))
    connection.ensure_connection()
    return sql.SQL(_HOLDING_SQL).format(part=part).as_string(connection.connection)


def _holding(*, owner_id: int, ids: Iterable[int], statuses: list[str], others_only: bool) -> list[int]:
    wanted = sorted(set(ids))
    if not wanted:
        return []
    params: dict[str, Any] = {"owner": owner_id, "ids": wanted, "statuses": statuses}
    with connection.cursor() as cursor:
        cursor.execute(holding_sql(owner_id), params)
        found = {row[0] for row in cursor.fetchall()}
    return sorted(found - set(wanted) if others_only else found)


def index_dependents(*, owner_id: int, ids: Iterable[int]) -> list[int]:
    """Messages (not purged) of the owner, not among `ids`, whose index was built from any of `ids`."""
    return _holding(owner_id=owner_id, ids=ids, statuses=_NOT_PURGED, others_only=True)


# The messages (not purged) whose previous turn each of %(ids)s (the owner's)
# now is, after a restore or a rewrite put in its place: every message after m
# in its thread up to and including the next live memory message `n` (all of
# them, when none follows). The ones in between are removed or not memory;
# a removed one keeps an index too (it is what a restore brings back), so it
# is recomputed with the rest. Each range is read by message_thread_seq and
# message_thread_place, like INDEX_ROWS_SQL's previous turn.
_FOLLOWERS_SQL = f"""
SELECT DISTINCT q.id
FROM {_TABLE} m
LEFT JOIN LATERAL (
    SELECT cand.k1, cand.k2 FROM (
        (SELECT q.seq AS k1, q.seq AS k2 FROM {_TABLE} q
         WHERE q.thread_id = m.thread_id AND q.place IS NULL AND {_MEMORY_LIVE} AND q.seq > coalesce(m.place, m.seq)
         ORDER BY q.seq LIMIT 1)
        UNION ALL
        (SELECT q.place, q.seq FROM {_TABLE} q
         WHERE q.thread_id = m.thread_id AND q.place IS NOT NULL AND {_MEMORY_LIVE}
           AND (q.place, q.seq) > (coalesce(m.place, m.seq), m.seq)
         ORDER BY q.place, q.seq LIMIT 1)
    ) cand
    ORDER BY cand.k1, cand.k2
    LIMIT 1
) n ON true
JOIN LATERAL (
    (SELECT q.id FROM {_TABLE} q
     WHERE q.owner_id = %(owner)s AND q.thread_id = m.thread_id AND q.place IS NULL AND q.status <> 'purged'
       AND q.seq >= coalesce(m.place, m.seq) AND (q.seq, q.seq) > (coalesce(m.place, m.seq), m.seq)
       AND (n.k1 IS NULL OR (q.seq <= n.k1 AND (q.seq, q.seq) <= (n.k1, n.k2))))
    UNION ALL
    (SELECT q.id FROM {_TABLE} q
     WHERE q.owner_id = %(owner)s AND q.thread_id = m.thread_id AND q.place IS NOT NULL AND q.status <> 'purged'
       AND (q.place, q.seq) > (coalesce(m.place, m.seq), m.seq)
       AND (n.k1 IS NULL OR (q.place, q.seq) <= (n.k1, n.k2)))
) q ON true
WHERE m.owner_id = %(owner)s AND m.id = ANY(%(ids)s)
"""


def index_followers(*, owner_id: int, ids: Iterable[int]) -> list[int]:
    """The owner's messages (not purged) whose previous turn is now one of `ids`: up to the next live memory message."""
    wanted = sorted(set(ids))
    if not wanted:
        return []
    with lookup_cursor() as cursor:
        cursor.execute(
            _FOLLOWERS_SQL, {"owner": owner_id, "ids": wanted, "live": LIVE_STATUSES, "memory": MEMORY_ROLES}
        )
        return sorted(row[0] for row in cursor.fetchall())


def index_stale(*, owner_id: int, removed: Iterable[int]) -> list[int]:
    """Live messages of the owner whose index still holds words of a removed message (the receipt's check)."""
    return _holding(owner_id=owner_id, ids=removed, statuses=LIVE_STATUSES, others_only=False)
