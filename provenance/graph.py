"""The memory graph's window: nodes and edges of a period, and Find (the graph page, docs/API.md "Graph")."""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from django.contrib.postgres.search import SearchQuery, SearchVectorField
from django.db.models import BooleanField, Case, ExpressionWrapper, Func, OuterRef, Q, QuerySet, Subquery, When
from django.db.models.functions import Substr

from chat.models import LIVE_STATUSES, ContextEdge, Fact, Message, Thread
from core.errors import NotFound
from core.types import User

LABEL_CHARS = 40


def live_count(*, owner_id: int, ids: Iterable[int]) -> int:
    """How many of the owner's messages `ids` are live."""
    return Message.objects.filter(owner_id=owner_id, pk__in=list(ids), status__in=LIVE_STATUSES).count()


def graph_nodes(*, owner: User, thread_id: int | None = None, include_deleted: bool = False) -> QuerySet[Message]:
    """The owner's messages as graph nodes, with a short `snippet` instead of the whole text."""
    nodes = Message.objects.filter(owner=owner)
    if thread_id is not None:
        if not Thread.objects.filter(owner=owner, pk=thread_id).exists():
            raise NotFound(f"No thread with id {thread_id}.")
        nodes = nodes.filter(thread_id=thread_id)
    if not include_deleted:
        nodes = nodes.filter(status__in=LIVE_STATUSES)
    return nodes.annotate(
        snippet=Substr("content", 1, LABEL_CHARS + 1),
        # A reply that called tools: drawn as a tool step (the calls themselves are not read).
        called=ExpressionWrapper(Q(tool_calls__isnull=False), output_field=BooleanField()),
        # A live fact's subject (chat/subjects.py); null for every other message: a removed fact (drawn with
        # include_deleted, the staff graph) tells nobody what it was about.
        subject=Case(
            When(
                status__in=LIVE_STATUSES,
                then=Subquery(
                    Fact.objects.filter(owner_id=OuterRef("owner_id"), message_id=OuterRef("pk")).values("subject")[:1]
                ),
            ),
            default=None,
        ),
    ).order_by("seq")


def graph_edges(*, owner: User, nodes: QuerySet[Message] | list[int]) -> QuerySet[ContextEdge]:
    """Edges with both ends among `nodes` (messages, or their ids; two queries, whatever their number)."""
    # The ids are read first: given as a subquery on both ends, PostgreSQL may
    # plan a nested loop that takes seconds on a few thousand messages.
    ids = nodes if isinstance(nodes, list) else list(nodes.values_list("pk", flat=True))
    return (
        ContextEdge.objects.filter(owner=owner, source_id__in=ids, target_id__in=ids)
        .only("id", "source_id", "target_id", "rank", "score", "signal")
        .order_by("target_id", "rank", "source_id")
    )


class _OwnWords(Func):
    """A message's own words: weight A of its search vector (its context's words are B, chat/index/context.py)."""

    function = "ts_filter"
    template = "%(function)s(%(expressions)s, '{a}')"
    output_field = SearchVectorField()


def graph_find(
    *,
    owner: User,
    q: str,
    thread_id: int | None = None,
    include_deleted: bool = False,
    before: int | None = None,
    limit: int,
) -> list[int]:
    """Ids of the messages of `graph_window`'s window (the same filters) whose own words match `q`.

    `q` is web search syntax (english config), as `GET /api/messages/?q=`; a
    message's context words (its previous turn, speaker, date) do not count:
    Find shows what a message says. The GIN index reads the matches; the
    window is the newest `limit` messages, as the graph draws them.
    """
    nodes = graph_nodes(owner=owner, thread_id=thread_id, include_deleted=include_deleted)
    if before is not None:
        nodes = nodes.filter(seq__lt=before)
    lowest = next(iter(nodes.order_by("-seq").values_list("seq", flat=True)[limit - 1 : limit]), None)
    query = SearchQuery(q, config="english", search_type="websearch")
    found = nodes.filter(search=query).annotate(own=_OwnWords("search")).filter(own=query)
    if lowest is not None:
        found = found.filter(seq__gte=lowest)
    return list(found.order_by("seq").values_list("pk", flat=True))


class GraphNode(NamedTuple):
    """A message as the graph shows it: read as plain rows, no model instance per node."""

    id: int
    seq: int
    role: str
    status: str
    thread_id: int
    imported_from: str
    snippet: str  # the first LABEL_CHARS + 1 characters
    called: bool  # a reply that called tools
    subject: str | None  # a fact's subject


class GraphEdge(NamedTuple):
    source_id: int
    target_id: int
    score: float
    rank: int
    signal: str


@dataclass(frozen=True)
class GraphWindow:
    nodes: list[GraphNode]  # in sequence order
    edges: list[GraphEdge]
    total: int  # messages matching the filters
    older: bool  # messages older than the window exist
    edges_capped: bool


def graph_window(
    *,
    owner: User,
    thread_id: int | None = None,
    include_deleted: bool = False,
    before: int | None = None,
    limit: int,
    max_edges: int,
) -> GraphWindow:
    """The newest `limit` messages (older than seq `before`, when given) and at most `max_edges` edges among them.

    A heavy history opens as a window: the response and the page that draws it
    stay bounded whatever the history's size.
    """
    nodes = graph_nodes(owner=owner, thread_id=thread_id, include_deleted=include_deleted)
    total = nodes.count()
    if before is not None:
        nodes = nodes.filter(seq__lt=before)
    window = [GraphNode(*row) for row in nodes.order_by("-seq").values_list(*GraphNode._fields)[: limit + 1]]
    older = len(window) > limit
    window = window[:limit][::-1]
    edges = [
        GraphEdge(*row)
        for row in graph_edges(owner=owner, nodes=[node.id for node in window]).values_list(*GraphEdge._fields)[
            : max_edges + 1
        ]
    ]
    return GraphWindow(
        nodes=window, edges=edges[:max_edges], total=total, older=older, edges_capped=len(edges) > max_edges
    )
