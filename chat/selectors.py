"""Reads over the message store: context retrieval and history."""

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.postgres.search import SearchQuery
from django.db.models import F, Prefetch, QuerySet, prefetch_related_objects
from django.db.models.functions import Coalesce

from chat.embeddings import embed_one
from chat.llm import ContextItem
from chat.models import INDEX_FIELDS, LIVE_STATUSES, SAID_AT_SQL, ContextEdge, Message, Thread, Turn
from chat.retrieval import NEIGHBOURS, hybrid_retrieve, neighbours_add
from chat.vector_indexes import embedding_cast, vector_query_cursor
from dellm_site.errors import NotFound, ValidationFailed

_MESSAGES = Message._meta.db_table

# Exact per-owner search, unless the owner has a partial IVFFlat index
# (chat/vector_indexes.py: from MIN_MESSAGES messages on). The candidates step orders
# by distance alone so that the planner can use that index; without one it is
# the same exact top-N sort as before. The top-k is then re-ranked exactly
# (distance, then newest first) and materialized before the threshold is
# applied, so the planner cannot turn the threshold into a filter that changes
# which k rows the ordering picks. No HNSW index: under a per-owner filter
# pgvector 0.6 returns fewer than k rows (no iterative index scans), and on
# duplicate-heavy histories it can miss the true neighbours entirely.
# __EMBEDDING__ is the indexes' expression, `embedding::vector(<dim>)` (the
# column has no dimension; chat/vector_indexes.py).
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
    similarity and full text (chat/retrieval.py), `vector` and `lexical` use
    one signal each, `window` and `full` take recent messages, `none` nothing.
    `threshold` is the cosine floor; `lexical_floor` the full-text one
    (default `DELLM_LEXICAL_FLOOR`). Similarity compares only vectors of the
    question's own embedding model, so while `manage.py reembed` switches
    models the two kinds are never mixed in one ranking. `neighbours`
    (default `chat.retrieval.NEIGHBOURS`) shares the k slots of a relevance
    policy between matches and the turns next to them (`neighbours_add`).
    """
    items = _matches(
        message=message, policy=policy, k=k, threshold=threshold, window=window, lexical_floor=lexical_floor
    )
    if policy not in ("relevant", "lexical", "vector"):
        return items
    return neighbours_add(
        owner_id=message.owner_id,
        items=items,
        k=k,
        exclude_id=message.id,
        mode=NEIGHBOURS if neighbours is None else neighbours,
    )


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


def vector_literal(vector: Iterable[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


# --- Reads for the HTTP API. Every one filters by owner: another owner's id
# is answered exactly like one that does not exist. ---------------------------

MESSAGE_STATUS_FILTERS = ("active", "deleted", "purged", "expiring", "all")


def thread_list(*, owner: User) -> QuerySet[Thread]:
    return Thread.objects.filter(owner=owner).order_by("-updated_at", "-id")


def thread_get(*, owner: User, thread_id: int) -> Thread:
    thread = Thread.objects.filter(owner=owner, pk=thread_id).first()
    if thread is None:
        raise NotFound(f"No thread with id {thread_id}.")
    return thread


def thread_message_list(*, thread: Thread) -> QuerySet[Message]:
    """The thread's live messages, newest position first, each annotated with its `position`.

    A rewrite is shown where the message it replaces was (`place`). Pages of it
    are read by the position (`chat.views.ThreadMessagePagination`), and
    `with_capped_edges` attaches their edges.
    """
    messages = Message.objects.filter(owner_id=thread.owner_id, thread=thread, status__in=LIVE_STATUSES)
    return messages.defer(*INDEX_FIELDS).annotate(position=Coalesce("place", "seq")).order_by("-position", "-seq")


def message_list(
    *, owner: User, thread_id: int | None = None, status: str = "active", q: str = ""
) -> QuerySet[Message]:
    """The owner's messages by status (`active` means live: active or expiring), thread and full-text query.

    Call `with_capped_edges` on the page that is shown.
    """
    if status not in MESSAGE_STATUS_FILTERS:
        raise ValidationFailed(
            f"status must be one of {', '.join(MESSAGE_STATUS_FILTERS)}.", fields={"status": "unknown"}
        )
    messages = Message.objects.filter(owner=owner).defer(*INDEX_FIELDS).order_by("seq")
    if thread_id is not None:
        messages = messages.filter(thread=thread_get(owner=owner, thread_id=thread_id))
    if status == "active":
        messages = messages.filter(status__in=LIVE_STATUSES)
    elif status != "all":
        messages = messages.filter(status=status)
    if q.strip():
        messages = messages.filter(search=SearchQuery(q, config="english", search_type="websearch"))
    return messages


def message_get(*, owner: User, message_id: int) -> Message:
    message = Message.objects.filter(owner=owner, pk=message_id).defer(*INDEX_FIELDS).first()
    if message is None:
        raise NotFound(f"No message with id {message_id}.")
    return with_capped_edges([message], limit=settings.DELLM_MESSAGE_MAX_EDGES)[0]


def message_ids_by_seq(*, owner: User, seqs: list[int]) -> list[int]:
    """Map the owner's sequence numbers (what the user sees as "#12") to message ids."""
    found = dict(Message.objects.filter(owner=owner, seq__in=seqs).values_list("seq", "pk"))
    missing = sorted(set(seqs) - set(found))
    if missing:
        raise NotFound(f"You have no message #{missing[0]}.", fields={"seq": str(missing[0])})
    return sorted(found.values())


def with_edges(messages: list[Message]) -> list[Message]:
    """Attach all `context_edges` and `derived_edges` (two queries for any number of messages).

    Each edge carries `other_status`, the status of the message at its far
    end, so a live message can leave removed neighbours out of its lists.
    For the export and single new messages; pages use `with_capped_edges`.
    """
    # Both ends name the owner (one user's messages), so each side reads one partition.
    owner_id = messages[0].owner_id if messages else 0
    edges = ContextEdge.objects.filter(owner_id=owner_id).only(
        "id", "source_id", "target_id", "rank", "score", "signal"
    )
    prefetch_related_objects(
        messages,
        Prefetch(
            "in_edges",
            queryset=edges.filter(source__owner_id=owner_id)
            .annotate(other_status=F("source__status"))
            .order_by("rank", "source_id"),
            to_attr="context_edges",
        ),
        Prefetch(
            "out_edges",
            queryset=edges.filter(target__owner_id=owner_id)
            .annotate(other_status=F("target__status"))
            .order_by("target_id"),
            to_attr="derived_edges",
        ),
    )
    for message in messages:
        message.edges_truncated = False
    return messages


# Each direction of a page's edges in one query: per message the first
# `limit` edges in the order the API lists them, read through LATERAL so that
# a message with 100k edges costs little more than `limit` lookups. A live
# message lists only live neighbours (as `_shown` in chat/serializers.py), so
# the cap counts what is shown: the far end's status is looked up by primary
# key, edge after edge in the listed order, until `limit` have been found. The
# edges are ordered first (the out-edges walk the unique (source, target)
# index; the in-edges of one message, at most a context's worth except for
# imports and `full` contexts, are sorted in memory), and OFFSET 0 keeps the
# planner from flattening either subquery into a join that would look up
# every edge's far end, or scan the messages table once per message.
_CAPPED_EDGES_SQL = f"""
SELECT e.id, e.source_id, e.target_id, e.rank, e.score, e.signal, e.other_status
FROM unnest(%(ids)s::bigint[], %(live)s::boolean[]) AS m(id, live)
CROSS JOIN LATERAL (
    SELECT c.id, c.source_id, c.target_id, c.rank, c.score, c.signal, o.status AS other_status
    FROM (
        SELECT id, source_id, target_id, rank, score, signal FROM {ContextEdge._meta.db_table}
        WHERE owner_id = %(owner)s AND __NEAR___id = m.id ORDER BY __ORDER__ OFFSET 0
    ) c
    CROSS JOIN LATERAL (SELECT status FROM {_MESSAGES} WHERE owner_id = %(owner)s AND id = c.__OTHER___id OFFSET 0) o
    WHERE NOT m.live OR o.status = ANY(%(live_statuses)s)
    ORDER BY __ORDER__
    LIMIT %(limit)s
) e
"""
_CONTEXT_EDGES_SQL = (
    _CAPPED_EDGES_SQL.replace("__NEAR__", "target")
    .replace("__OTHER__", "source")
    .replace("__ORDER__", "rank, source_id")
)
_DERIVED_EDGES_SQL = (
    _CAPPED_EDGES_SQL.replace("__NEAR__", "source").replace("__OTHER__", "target").replace("__ORDER__", "target_id")
)


def with_capped_edges(messages: list[Message], *, limit: int) -> list[Message]:
    """Attach at most `limit` `context_edges` and `derived_edges` per message (two queries).

    The context keeps its first edges by rank (rank 0, the question, first),
    the derived list the lowest ids. `edges_truncated` is set on each message:
    True when either list had more (the message detail, the graph and the
    dependents endpoint have the rest).
    """
    params = {
        "owner": messages[0].owner_id if messages else 0,
        "ids": [message.pk for message in messages],
        "live": [message.is_live for message in messages],
        "live_statuses": LIVE_STATUSES,
        # One more than shown, to tell whether there were more.
        "limit": limit + 1,
    }
    context: dict[int, list[ContextEdge]] = {message.pk: [] for message in messages}
    derived: dict[int, list[ContextEdge]] = {message.pk: [] for message in messages}
    for edge in ContextEdge.objects.raw(_CONTEXT_EDGES_SQL, params):
        context[edge.target_id].append(edge)
    for edge in ContextEdge.objects.raw(_DERIVED_EDGES_SQL, params):
        derived[edge.source_id].append(edge)
    for message in messages:
        message.edges_truncated = len(context[message.pk]) > limit or len(derived[message.pk]) > limit
        message.context_edges = context[message.pk][:limit]
        message.derived_edges = derived[message.pk][:limit]
    return messages


def turn_get(*, owner: User, turn_id: int) -> Turn:
    turn = Turn.objects.filter(owner=owner, pk=turn_id).first()
    if turn is None:
        raise NotFound(f"No turn with id {turn_id}.")
    # Read by (owner, id) rather than joined: a join by id alone would read every partition of the messages.
    reply = (
        Message.objects.filter(owner=owner, pk=turn.reply_id).defer(*INDEX_FIELDS).first() if turn.reply_id else None
    )
    turn.reply = reply
    if reply is not None:
        with_edges([reply])
    return turn


# --- Reads for agents (MCP, assistant/agents.py) -------------------------------


def embedding_model_latest(*, owner_id: int) -> str:
    """The model of the owner's newest vector, "" if they have none: the space the server embeds them in now.

    A process that would embed with another model (`manage.py dellm_mcp`
    started without the server's environment) would search and store notes
    in the wrong space. Newest, not any: after an embedder switch, old
    vectors wait for `manage.py reembed` while new messages already have the
    new model's.
    """
    latest = (
        Message.objects.filter(owner_id=owner_id, embedding__isnull=False)
        .exclude(embedding_model="")
        .order_by("-seq")
        .values_list("embedding_model", flat=True)
        .first()
    )
    return latest or ""


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
        k=k,
        threshold=settings.DELLM_CONTEXT_THRESHOLD,
        lexical_floor=settings.DELLM_LEXICAL_FLOOR,
        probes=IVFFLAT_PROBES,
        model=settings.DELLM_EMBEDDING_MODEL,
        dim=0 if vector is None else len(vector),
    )
    rows = Message.objects.filter(owner_id=owner_id).defer(*INDEX_FIELDS).in_bulk([item.id for item in items])
    return [(item, rows[item.id]) for item in items if item.id in rows]
