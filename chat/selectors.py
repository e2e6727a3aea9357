"""Reads over the message store: context retrieval and history."""

from django.db import connection

from chat.llm import ContextItem
from chat.models import Message

LIVE_STATUSES = [str(s) for s in Message.LIVE]

# Exact per-owner search. The inner top-k is materialized first and the
# threshold applied outside it, so the planner cannot turn the threshold into
# a filter that changes which k rows the ordering picks. No HNSW index: under
# a per-owner filter pgvector 0.6 returns fewer than k rows (no iterative
# index scans), silently dropping relevant context.
_RELEVANT_SQL = """
WITH topk AS MATERIALIZED (
    SELECT id, seq, role, content, 1 - (embedding <=> %(query)s::vector) AS score
    FROM chat_message
    WHERE owner_id = %(owner)s AND status = ANY(%(live)s) AND id <> %(exclude)s
      AND embedding IS NOT NULL
    ORDER BY embedding <=> %(query)s::vector, seq DESC
    LIMIT %(k)s
)
SELECT id, seq, role, content, score FROM topk WHERE score >= %(threshold)s ORDER BY score DESC, seq DESC
"""

# `window` and `full` take earlier messages by position; the score is still
# recorded on the edge so the graph can show how related each one was.
_RECENT_SQL = """
SELECT id, seq, role, content,
       COALESCE(1 - (embedding <=> %(query)s::vector), 0) AS score
FROM chat_message
WHERE owner_id = %(owner)s AND status = ANY(%(live)s) AND seq < %(before)s
ORDER BY seq DESC
LIMIT %(limit)s
"""


def context_retrieve(*, message: Message, policy: str, k: int, threshold: float, window: int) -> list[ContextItem]:
    """The past messages that go into the context of the reply to `message`.

    Always the same owner's live messages only; `message` itself is not
    included (the caller adds it as the query).
    """
    if policy == "none":
        return []
    query = vector_literal(message.embedding)
    params = {"query": query, "owner": message.owner_id, "live": LIVE_STATUSES}
    if policy == "relevant":
        sql = _RELEVANT_SQL
        params |= {"exclude": message.id, "k": k, "threshold": threshold}
    else:
        sql = _RECENT_SQL
        params |= {"before": message.seq, "limit": window if policy == "window" else None}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    items = [ContextItem(id=r[0], seq=r[1], role=r[2], content=r[3], score=float(r[4])) for r in rows]
    if policy != "relevant":
        items.reverse()
    return items


def vector_literal(vector) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"
