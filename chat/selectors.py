"""Reads over the message store: context retrieval and history."""

from django.conf import settings
from django.contrib.postgres.search import SearchQuery
from django.db.models import F, Prefetch, Q, QuerySet, prefetch_related_objects
from django.db.models.functions import Coalesce

from chat.models import INDEX_FIELDS, LIVE_STATUSES, ContextEdge, Message, Thread, Turn
from chat.subjects import FACTS_SOURCE, FACTS_SOURCE_ID
from core.errors import NotFound, ValidationFailed
from core.types import User

_MESSAGES = Message._meta.db_table


# --- Reads for the HTTP API. Every one filters by owner: another owner's id
# is answered exactly like one that does not exist. ---------------------------

MESSAGE_STATUS_FILTERS = ("active", "deleted", "purged", "expiring", "all")


def thread_list(*, owner: User, with_facts: bool = False) -> QuerySet[Thread]:
    """The owner's conversations, newest first (not the facts thread, whose facts are on the profile page,
    unless `with_facts`: the export lists every thread its messages name)."""
    threads = Thread.objects.filter(owner=owner)
    if not with_facts:
        facts = Thread.objects.filter(owner=owner, source=FACTS_SOURCE, source_id=FACTS_SOURCE_ID)
        threads = threads.exclude(pk__in=facts.values("pk"))
    return threads.order_by("-updated_at", "-id")


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


# --- Reads for agents (MCP, assistant/mcp/tools.py) -------------------------------


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


# What a tool step is (docs/API.md, "Tool steps"): a reply that called the client's tools, the client's result
# for one call, or a reply written after tool results.
TOOL_CALL, TOOL_RESULT, TOOL_ANSWER = "call", "result", "answer"


def tool_step_kinds(ids: set[int], *, owner_ids: set[int]) -> dict[int, str]:
    """{id: "call" | "result" | "answer"} for the tool steps among `ids`, messages of `owner_ids` (two queries)."""
    if not ids:
        return {}
    kinds: dict[int, str] = {}
    rows = Message.objects.filter(owner_id__in=owner_ids, pk__in=ids).filter(
        Q(role=Message.Role.TOOL) | Q(tool_calls__isnull=False)
    )
    for pk, role in rows.values_list("pk", "role"):
        kinds[pk] = TOOL_RESULT if role == Message.Role.TOOL else TOOL_CALL
    answers = ContextEdge.objects.filter(
        owner_id__in=owner_ids,
        target_id__in=ids - set(kinds),
        signal=ContextEdge.Signal.TOOL,
        source__owner_id__in=owner_ids,
        source__role=Message.Role.TOOL,
    )
    for pk in answers.values_list("target_id", flat=True).distinct():
        kinds[pk] = TOOL_ANSWER
    return kinds
