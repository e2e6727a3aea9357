"""A turn's context: the top-k of the owner's live messages for a question (docs/RETRIEVAL.md)."""

from typing import Any

from django.conf import settings

from chat.index.embeddings import embed_one
from chat.index.vectors import embedding_cast, vector_literal, vector_query_cursor
from chat.llm import ContextItem
from chat.models import INDEX_FIELDS, LIVE_STATUSES, SAID_AT_SQL, Message
from chat.retrieval.facts import FACTS_WIDTH, facts_choose, facts_held
from chat.retrieval.fused import hybrid_retrieve
from chat.retrieval.neighbours import NEIGHBOURS, neighbours_add

_MESSAGES = Message._meta.db_table

# Exact per-owner search, unless the owner has a partial IVFFlat index
# (chat/index/vectors.py: from MIN_MESSAGES messages on). The candidates step orders
# by distance alone so that the planner can use that index; without one it is
# the same exact top-N sort as before. The top-k is then re-ranked exactly
# (distance, then newest first) and materialized before the threshold is
# applied, so the planner cannot turn the threshold into a filter that changes
# which k rows the ordering picks. No HNSW index: under a per-owner filter
# pgvector 0.6 returns fewer than k rows (no iterative index scans), and on
# duplicate-heavy histories it can miss the true neighbours entirely.
# __EMBEDDING__ is the indexes' expression, `embedding::vector(<dim>)` (the
# column has no dimension; chat/index/vectors.py).
_RELEVANT_SQL = f"""
WITH candidates AS MATERIALIZED (
    SELECT id, seq, role, content, {SAID_AT_SQL} AS said_at, __EMBEDDING__ <=> %(query)s::vector AS distance
    FROM {_MESSAGES}
    WHERE owner_id = %(owner)s AND status = ANY(%(live)s) AND id <> %(exclude)s AND role <> %(system)s
      AND role <> %(tool)s AND tool_calls IS NULL
      AND embedding IS NOT NULL AND embedding_model = %(model)s
    ORDER BY __EMBEDDING__ <=> %(query)s::vector
    LIMIT %(candidates)s
), topk AS MATERIALIZED (
    SELECT id, seq, role, content, 1 - distance AS score, said_at FROM candidates
    ORDER BY distance, seq DESC LIMIT %(k)s
)
SELECT id, seq, role, content, score, said_at FROM topk WHERE score >= %(threshold)s ORDER BY score DESC, seq DESC
"""
# Candidates re-ranked per query: ties at the k-th distance are broken by
# recency among these, and an IVFFlat scan yields them from its probed lists.
RELEVANT_CANDIDATES = 40
# IVFFlat lists probed per query (an index has about sqrt(rows) lists). On
# WordLlama vectors of a realistic corpus (docs/RETRIEVAL.md), 10 found 0.96-0.97
# of the exact top-10 at 2k-30k messages, 20 found 0.984-0.990, in about 0.7 ms at 10k.
IVFFLAT_PROBES = 20

# `window` and `full` take earlier messages by position; the score is still
# recorded on the edge so the graph can show how related each one was (0 for
# a message embedded by another model: never compared).
_RECENT_SQL = f"""
SELECT id, seq, role, content,
       CASE WHEN embedding_model = %(model)s THEN COALESCE(1 - (embedding <=> %(query)s::vector), 0) ELSE 0 END
       AS score,
       {SAID_AT_SQL} AS said_at
FROM {_MESSAGES}
WHERE owner_id = %(owner)s AND status = ANY(%(live)s) AND seq < %(before)s AND role <> %(system)s
  AND role <> %(tool)s AND tool_calls IS NULL
ORDER BY seq DESC
LIMIT %(limit)s
"""


def context_retrieve(
    *,
    message: Message,
    policy: str,
    k: int,
    threshold: float,
    window: int,
    lexical_floor: float | None = None,
    neighbours: str | None = None,
) -> list[ContextItem]:
    """The past messages that go into the context of the reply to `message`.

    Always the same owner's live messages only, never a system prompt (an
    input of the replies it shaped, not a memory); `message` itself is not
    included (the caller adds it as the query). Policies: `relevant` fuses
    similarity and full text (chat/retrieval/fused.py), `vector` and `lexical` use
    one signal each, `window` and `full` take recent messages, `none` nothing.
    `threshold` is the cosine floor; `lexical_floor` the full-text one
    (default `DELLM_LEXICAL_FLOOR`). Similarity compares only vectors of the
    question's own embedding model, so while `manage.py reembed` switches
    models the two kinds are never mixed in one ranking. `neighbours`
    (default `chat.retrieval.neighbours.NEIGHBOURS`) shares the k slots of a relevance
    policy between matches and the turns next to them (`neighbours_add`). Facts found
    compete for the same slots; the current fact of a subject stands for a superseded one
    (`chat.retrieval.facts.facts_choose`).
    """
    relevance = policy in ("relevant", "lexical", "vector")
    # With facts, FACTS_WIDTH times k are read, the facts settled (a superseded one gives way, facts go first,
    # their sources may go), and the first k kept: `make eval` measures recall@5 the same way.
    wide = k * FACTS_WIDTH if relevance and facts_held(owner_id=message.owner_id) else k
    items = _matches(
        message=message, policy=policy, k=wide, threshold=threshold, window=window, lexical_floor=lexical_floor
    )
    if relevance:
        items = neighbours_add(
            owner_id=message.owner_id,
            items=items,
            k=wide,
            exclude_id=message.id,
            mode=NEIGHBOURS if neighbours is None else neighbours,
        )
    return facts_choose(owner_id=message.owner_id, items=items)[: k if relevance else None]


def _matches(
    *, message: Message, policy: str, k: int, threshold: float, window: int, lexical_floor: float | None
) -> list[ContextItem]:
    """The policy's own context, before neighbours."""
    query = None if message.embedding is None else vector_literal(message.embedding)
    dim = 0 if message.embedding is None else len(message.embedding)
    if policy in ("relevant", "lexical"):
        return hybrid_retrieve(
            owner_id=message.owner_id,
            exclude_id=message.id,
            text=message.content,
            query=query,
            k=k,
            threshold=threshold,
            lexical_floor=settings.DELLM_LEXICAL_FLOOR if lexical_floor is None else lexical_floor,
            signals="both" if policy == "relevant" else "lexical",
            probes=IVFFLAT_PROBES,
            model=message.embedding_model,
            dim=dim,
            asked_at=message.said_at,
        )
    # A message with nothing to embed has no neighbours by similarity.
    if policy == "none" or (policy == "vector" and message.embedding is None):
        return []
    params: dict[str, Any] = {
        "query": query,
        "owner": message.owner_id,
        "live": LIVE_STATUSES,
        "system": str(Message.Role.SYSTEM),
        "tool": str(Message.Role.TOOL),
        "model": message.embedding_model,
    }
    if policy == "vector":
        sql = _RELEVANT_SQL.replace("__EMBEDDING__", embedding_cast(dim))
        params |= {
            "exclude": message.id,
            "k": k,
            "candidates": max(k, RELEVANT_CANDIDATES),
            "threshold": threshold,
        }
    else:
        sql = _RECENT_SQL
        params |= {"before": message.seq, "limit": window if policy == "window" else None}
    with vector_query_cursor(probes=IVFFLAT_PROBES) as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    signal = "vector" if policy == "vector" else ""
    items = [
        ContextItem(id=r[0], seq=r[1], role=r[2], content=r[3], score=float(r[4]), signal=signal, said_at=r[5])
        for r in rows
    ]
    if policy != "vector":
        items.reverse()
    return items


def memory_search(*, owner_id: int, text: str, k: int) -> list[tuple[ContextItem, Message]]:
    """The owner's live memories that a question `text` would bring into a reply's context, best first.

    The same retrieval as a turn's (`relevant`: similarity and full text fused,
    each with its own floor, never a system prompt), with the question embedded
    by the configured model. Each item comes with its row (dates, thread, role).
    """
    vector = embed_one(text)
    items = hybrid_retrieve(
        owner_id=owner_id,
        exclude_id=0,
        text=text,
        query=None if vector is None else vector_literal(vector),
        k=k * FACTS_WIDTH if facts_held(owner_id=owner_id) else k,
        threshold=settings.DELLM_CONTEXT_THRESHOLD,
        lexical_floor=settings.DELLM_LEXICAL_FLOOR,
        probes=IVFFLAT_PROBES,
        model=settings.DELLM_EMBEDDING_MODEL,
        dim=0 if vector is None else len(vector),
    )
    items = facts_choose(owner_id=owner_id, items=items)[:k]
    rows = Message.objects.filter(owner_id=owner_id).defer(*INDEX_FIELDS).in_bulk([item.id for item in items])
    return [(item, rows[item.id]) for item in items if item.id in rows]
