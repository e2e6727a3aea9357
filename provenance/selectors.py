"""Reads over the provenance graph G: Dep(M), explanation paths, taint checks."""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from django.conf import settings
from django.contrib.postgres.expressions import ArraySubquery
from django.contrib.postgres.search import SearchQuery, SearchVectorField
from django.db import connection
from django.db.models import BooleanField, ExpressionWrapper, Func, OuterRef, Q, QuerySet
from django.db.models.functions import JSONObject, Substr

from chat.models import LIVE_STATUSES, REMOVED_STATUSES, ContextEdge, MemoryRead, Message, Thread, Turn
from dellm_site.errors import NotFound
from dellm_site.lookups import BIGINT
from dellm_site.types import User
from provenance.models import DeletionRequest

_MESSAGES = Message._meta.db_table
_EDGES = ContextEdge._meta.db_table
_DELETIONS = DeletionRequest._meta.db_table

# UNION (not UNION ALL) on the id column alone: each message enters the
# working table at most once, so fan-in cannot multiply rows. A path or depth
# column in the recursive term would defeat that deduplication. Roots of
# another owner start nothing.
_DEP_SQL = f"""
WITH RECURSIVE dep(id) AS (
    SELECT id FROM {_MESSAGES} WHERE id = ANY(%(roots)s::bigint[]) AND owner_id = %(owner)s
  UNION
    SELECT e.target_id
    FROM {_EDGES} e
    JOIN dep ON e.source_id = dep.id
    WHERE e.owner_id = %(owner)s
)
SELECT id FROM dep
"""

# Depth-limited variant (taint level k). The level column is bounded by k, so
# the working table holds at most k + 1 rows per message.
_DEP_DEPTH_SQL = f"""
WITH RECURSIVE dep(id, level) AS (
    SELECT id, 0 FROM {_MESSAGES} WHERE id = ANY(%(roots)s::bigint[]) AND owner_id = %(owner)s
  UNION
    SELECT e.target_id, dep.level + 1
    FROM {_EDGES} e
    JOIN dep ON e.source_id = dep.id
    WHERE e.owner_id = %(owner)s AND dep.level < %(depth)s
)
SELECT id FROM dep GROUP BY id
"""


def dep_ids(*, owner_id: int, roots: list[int], depth: int | None = None) -> set[int]:
    """Dep(M): the roots plus every message reachable from them (within `depth` hops).

    An id past bigint's range is no message's: it matches nothing, as in the
    ORM's lookups (`dellm_site.lookups`), instead of failing the array's cast.
    """
    roots = sorted({root for root in roots if BIGINT[0] <= root <= BIGINT[1]})
    if not roots:
        return set()
    params: dict[str, Any] = {"roots": roots, "owner": owner_id, "depth": depth}
    with connection.cursor() as cursor:
        cursor.execute(_DEP_SQL if depth is None else _DEP_DEPTH_SQL, params)
        return {row[0] for row in cursor.fetchall()}


# Explanation paths: a breadth-first walk from all roots at once, each level
# read in queue order (the parent's place in its level, then the child's id),
# so a message's parent is the one a queue over id-sorted adjacency lists would
# give it: its path is its lexicographically smallest shortest path from the
# roots. The bounded walk is one statement: its working table is one row per
# level (the level's ids and their parents' ids as arrays), each level takes
# only the children still wanted, and the walk stops at the bound, so it reads
# the out-edges of the levels it lists, never the edges of all of Dep(M). The
# owner is named on the roots and on every edge read (a hash-partitioned table
# is pruned to the owner's partition).
_WALK_SQL = f"""
WITH RECURSIVE walk(level, frontier, parents, seen, found) AS (
    SELECT 0, coalesce(array_agg(id ORDER BY id), '{{}}'), '{{}}'::bigint[], coalesce(array_agg(id), '{{}}'), 0
    FROM {_MESSAGES} WHERE id = ANY(%(roots)s::bigint[]) AND owner_id = %(owner)s
  UNION ALL
    SELECT w.level + 1, n.children, n.parents, w.seen || n.children, w.found + cardinality(n.children)
    FROM walk w
    CROSS JOIN LATERAL (
        SELECT coalesce(array_agg(c.target ORDER BY c.pos, c.target), '{{}}') AS children,
               coalesce(array_agg(w.frontier[c.pos] ORDER BY c.pos, c.target), '{{}}') AS parents
        FROM (
            SELECT first.target, first.pos
            FROM (
                SELECT DISTINCT ON (e.target_id) e.target_id AS target, f.pos
                FROM unnest(w.frontier) WITH ORDINALITY AS f(id, pos)
                JOIN {_EDGES} e ON e.owner_id = %(owner)s AND e.source_id = f.id
                WHERE NOT (e.target_id = ANY(w.seen))
                ORDER BY e.target_id, f.pos
            ) first
            ORDER BY first.pos, first.target
            LIMIT %(limit)s - w.found
        ) c
    ) n
    WHERE cardinality(w.frontier) > 0 AND w.found < %(limit)s
      AND (%(depth)s::integer IS NULL OR w.level < %(depth)s::integer)
)
SELECT u.child, u.parent, m.seq, m.role, m.status
FROM walk w
CROSS JOIN LATERAL unnest(w.frontier, w.parents) AS u(child, parent)
JOIN {_MESSAGES} m ON m.owner_id = %(owner)s AND m.id = u.child
WHERE w.level > 0
"""

# One whole level of the same walk, for one message's path on demand.
_LEVEL_SQL = f"""
SELECT f.pos, e.target_id
FROM unnest(%(frontier)s::bigint[]) WITH ORDINALITY AS f(id, pos)
JOIN {_EDGES} e ON e.owner_id = %(owner)s AND e.source_id = f.id
ORDER BY f.pos, e.target_id
"""


def _path(parent: dict[int, int], node: int) -> list[int]:
    path = [node]
    while (up := parent.get(path[-1])) is not None:
        path.append(up)
    return path[::-1]


def _walk(*, owner_id: int, roots: list[int], depth: int | None, limit: int) -> list[tuple[int, int, int, str, str]]:
    """(message, parent, seq, role, status) of the nearest `limit` messages of the walk, level by level."""
    if not roots or limit <= 0:
        return []
    with connection.cursor() as cursor:
        cursor.execute(_WALK_SQL, {"roots": sorted(set(roots)), "owner": owner_id, "limit": limit, "depth": depth})
        return cursor.fetchall()


def explanation_paths(
    *, owner_id: int, roots: list[int], depth: int | None = None, limit: int | None = None
) -> dict[int, list[int]]:
    """For the nearest dependents of the roots (within `depth` hops), one shortest path [root, ..., member] each.

    Breadth-first from all roots at once, visiting ids in ascending order, so
    the answer is deterministic (`_WALK_SQL`). At most `limit` (default
    DELLM_MAX_EXPLANATION_PATHS) members get a path, the nearest first: in a
    long chain the paths' total length grows with the square of its length,
    and a preview or a dependents answer must stay bounded (their
    `count`/`total` still say how many there are; `dependent_path` gives any
    one member's path on demand).
    """
    limit = settings.DELLM_MAX_EXPLANATION_PATHS if limit is None else limit
    parent = {node: up for node, up, *_ in _walk(owner_id=owner_id, roots=roots, depth=depth, limit=limit)}
    return {node: _path(parent, node) for node in parent}


def taint_violations(*, owner_id: int | None = None) -> list[tuple[int, int, int]]:
    """Invariant I1: live messages with a non-live parent, as (owner, message, parent).

    Checking direct parents suffices: on any path from a removed ancestor to a
    live message, the first removed -> live step is such an edge. Parents
    removed by a depth-limited deletion are the one allowed exception (relaxed
    taint, recorded in that deletion's audit row).
    """
    # Driven from the removed messages (few, found by the owner/status index)
    # to their out-edges, not from all of the owner's edges: a whole-history
    # context gives an owner O(n^2) edges, and every receipt runs this check.
    # The product checks one owner (named in each table: one partition, one shard); `dellm_check` all of them.
    one = "AND {table}.owner_id = %(owner)s" if owner_id is not None else ""
    sql = f"""
        SELECT t.owner_id, t.id, s.id
        FROM {_MESSAGES} s
        LEFT JOIN {_DELETIONS} d ON d.owner_id = s.owner_id AND d.id = s.deleted_by_id {one.format(table="d")}
        JOIN {_EDGES} e ON e.owner_id = s.owner_id AND e.source_id = s.id {one.format(table="e")}
        JOIN {_MESSAGES} t ON t.owner_id = e.owner_id AND t.id = e.target_id {one.format(table="t")}
        WHERE s.status = ANY(%(removed)s) AND t.status = ANY(%(live)s)
          AND (d.id IS NULL OR d.depth IS NULL) {one.format(table="s")}
        ORDER BY t.owner_id, t.id, s.id
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, {"live": LIVE_STATUSES, "removed": REMOVED_STATUSES, "owner": owner_id})
        return [tuple(row) for row in cursor.fetchall()]


def cross_owner_edges() -> list[tuple[int, int, int]]:
    """Edges whose ends do not both belong to the edge's owner, as (edge, source, target).

    There should be none: a context is drawn from the owner's own messages,
    and sharding by owner relies on that. One pass over all edges, so it
    belongs to `manage.py dellm_check`, not to a page.
    """
    sql = f"""
        SELECT e.id, e.source_id, e.target_id
        FROM {_EDGES} e
        JOIN {_MESSAGES} s ON s.id = e.source_id
        JOIN {_MESSAGES} t ON t.id = e.target_id
        WHERE s.owner_id <> e.owner_id OR t.owner_id <> e.owner_id
        ORDER BY e.id
    """
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return [tuple(row) for row in cursor.fetchall()]


# --- Reads for the HTTP API, all filtered by owner. ----------------------------


def deletion_list(*, owner: User) -> QuerySet[DeletionRequest]:
    return with_regeneration_turns(
        DeletionRequest.objects.filter(owner=owner).order_by("-created_at", "-id"), owner_id=owner.pk
    )


# The fields of a regeneration turn that its deletion's progress shows.
REGENERATION_TURN_FIELDS = ("id", "replaces", "user_message_id", "status", "reply_id", "error")


def with_regeneration_turns(deletions: QuerySet[DeletionRequest], *, owner_id: int) -> QuerySet[DeletionRequest]:
    """Each deletion annotated with `regeneration_turns`: its turns' fields as dicts, oldest reply first.

    Turns point at their deletion by a plain id (`Turn.deletion_id`: chat never
    depends on provenance), so there is no relation to prefetch; one array
    subquery in the same SELECT reads them for every listed deletion (no N+1).
    The deletions are `owner_id`'s: the subquery names the owner as a constant,
    so it reads the owner's partition of the turns only.
    """
    turns = (
        Turn.objects.filter(owner_id=owner_id, deletion_id=OuterRef("pk"))
        .order_by("replaces", "pk")
        .values(row=JSONObject(**{name: name for name in REGENERATION_TURN_FIELDS}))
    )
    return deletions.annotate(regeneration_turns=ArraySubquery(turns))


def imported_dependents_attach(deletions: list[DeletionRequest]) -> None:
    """Set `imported_dependents` (imported replies among the dependents) on each deletion, in one query."""
    wanted = {pk for deletion in deletions for pk in deletion.dependent_ids}
    imported: set[int] = set()
    if wanted:
        imported = set(
            Message.objects.filter(
                owner_id__in={d.owner_id for d in deletions}, pk__in=wanted, role=Message.Role.ASSISTANT
            )
            .exclude(imported_from="")
            .values_list("pk", flat=True)
        )
    for deletion in deletions:
        deletion.imported_dependents = [pk for pk in deletion.dependent_ids if pk in imported]


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


def tool_steps_attach(deletions: list[DeletionRequest]) -> None:
    """Set `tool_steps` ([{"id", "kind"}] of the matched and dependent tool steps, in id order) on each deletion."""
    kinds = tool_step_kinds(
        {pk for d in deletions for pk in [*d.matched_ids, *d.dependent_ids]}, owner_ids={d.owner_id for d in deletions}
    )
    for deletion in deletions:
        wanted = sorted({*deletion.matched_ids, *deletion.dependent_ids} & set(kinds))
        deletion.tool_steps = [{"id": pk, "kind": kinds[pk]} for pk in wanted]


# Reads listed per deletion, the newest first (`count` says how many there are).
AGENT_READS_LISTED = 50
COPIES_OUTSIDE = (
    "DeLLM cannot erase copies outside itself: these MCP clients were shown some of these memories "
    "(ids, client, time; never text). Ask them to forget too."
)


def _agent_reads_of(deletion: DeletionRequest, reads: list[MemoryRead]) -> dict[str, Any]:
    ids = set(deletion.matched_ids) | set(deletion.dependent_ids) | set(deletion.deleted_ids)
    hits = [
        {
            "client": read.client,
            "tool": read.tool,
            "read_at": read.read_at,
            "messages": sorted(ids & set(read.message_ids)),
        }
        for read in reads
        if read.owner_id == deletion.owner_id and ids.intersection(read.message_ids)
    ]
    return {"count": len(hits), "reads": hits[:AGENT_READS_LISTED], "note": COPIES_OUTSIDE if hits else ""}


def agent_reads_attach(deletions: list[DeletionRequest]) -> None:
    """Set `agent_reads` on each deletion: the MCP reads of its messages (chat.MemoryRead), in one query."""
    wanted = {pk for d in deletions for pk in (*d.matched_ids, *d.dependent_ids, *d.deleted_ids)}
    reads: list[MemoryRead] = []
    if wanted:
        reads = list(
            MemoryRead.objects.filter(
                owner_id__in={d.owner_id for d in deletions}, message_ids__overlap=sorted(wanted)
            ).order_by("-read_at", "-id")
        )
    for deletion in deletions:
        deletion.agent_reads = _agent_reads_of(deletion, reads)


def deletion_get(*, owner: User, deletion_id: int) -> DeletionRequest:
    deletion = DeletionRequest.objects.filter(owner=owner, pk=deletion_id).first()
    if deletion is None:
        raise NotFound(f"No deletion with id {deletion_id}.")
    return deletion


@dataclass(frozen=True)
class Dependent:
    id: int
    seq: int
    role: str
    status: str
    path: list[int]


@dataclass(frozen=True)
class Dependents:
    items: list[Dependent]  # the nearest `paths` (at most DELLM_MAX_EXPLANATION_PATHS), with a path each
    ids: list[int]  # all of Dep(m) minus m, ascending

    @property
    def count(self) -> int:
        return len(self.ids)

    @property
    def truncated(self) -> bool:
        return len(self.items) < self.count


def message_dependents(
    *, owner: User, message_id: int, depth: int | None = None, paths: int | None = None
) -> Dependents:
    """Dep(m) minus m: all its ids (one recursive CTE), and the nearest `paths` with a shortest path from m each.

    Two statements whatever the size: the CTE, then the bounded walk
    (`_WALK_SQL`, with each listed message's seq, role and status). The paths
    are bounded (`paths`, at most DELLM_MAX_EXPLANATION_PATHS), so their cost
    follows the number listed, not |Dep(m)|; `dependent_path` gives any other
    one on demand.
    """
    limit = settings.DELLM_MAX_EXPLANATION_PATHS if paths is None else min(paths, settings.DELLM_MAX_EXPLANATION_PATHS)
    # Dep(m) holds m exactly when m is the owner's: no separate existence query.
    members = dep_ids(owner_id=owner.pk, roots=[message_id], depth=depth)
    if message_id not in members:
        raise NotFound(f"No message with id {message_id}.")
    rows = _walk(owner_id=owner.pk, roots=[message_id], depth=depth, limit=limit)
    parent = {node: up for node, up, *_ in rows}
    listed = [
        Dependent(id=pk, seq=seq, role=role, status=status, path=_path(parent, pk))
        for pk, _, seq, role, status in sorted(rows, key=lambda row: row[2])
    ]
    return Dependents(items=listed, ids=sorted(members - {message_id}))


def dependent_path(*, owner: User, message_id: int, dependent_id: int, depth: int | None = None) -> list[int]:
    """The explanation path [m, ..., dependent] of one member of Dep(m) minus m, whatever its distance.

    The same path as `explanation_paths` would give it without its bound (the
    lexicographically smallest shortest path); the walk stops at the level that
    reaches it. NotFound when it is not a dependent of m (within `depth`).
    """
    if not Message.objects.filter(owner=owner, pk=message_id).exists():
        raise NotFound(f"No message with id {message_id}.")
    parent: dict[int, int] = {}
    seen, frontier, level = {message_id}, [message_id], 0
    with connection.cursor() as cursor:
        while frontier and dependent_id not in seen and (depth is None or level < depth):
            cursor.execute(_LEVEL_SQL, {"frontier": frontier, "owner": owner.pk})
            following = []
            for pos, child in cursor.fetchall():
                if child not in seen:
                    seen.add(child)
                    parent[child] = frontier[pos - 1]
                    following.append(child)
            frontier, level = following, level + 1
    if dependent_id not in parent:
        raise NotFound(f"Message {dependent_id} is not a dependent of message {message_id}.")
    return _path(parent, dependent_id)


LABEL_CHARS = 40


def removes_attach(deletions: list[DeletionRequest]) -> None:
    """Set `removes` on each deletion, in one query: for a preview, how many of its messages confirming changes now.

    Soft: the live ones. Purge or expire: every one not purged yet (a purge
    destroys the text of a soft-deleted one too). Dep(m) holds messages other
    deletions removed already; a preview counts only what it would change.
    None for a deletion that is not a preview.
    """
    previews = [d for d in deletions if d.status == DeletionRequest.Status.PREVIEWED]
    wanted = {pk for d in previews for pk in (*d.matched_ids, *d.dependent_ids)}
    status: dict[int, str] = {}
    if wanted:
        rows = Message.objects.filter(owner_id__in={d.owner_id for d in previews}, pk__in=wanted)
        status = dict(rows.values_list("pk", "status"))
    for deletion in deletions:
        deletion.removes = None
        if deletion.status == DeletionRequest.Status.PREVIEWED:
            soft = deletion.mode == DeletionRequest.Mode.SOFT
            changed = Message.LIVE if soft else (*Message.LIVE, Message.Status.DELETED)
            members = {*deletion.matched_ids, *deletion.dependent_ids}
            deletion.removes = sum(1 for pk in members if status.get(pk) in changed)


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
    """A message's own words: weight A of its search vector (its context's words are B, chat/index_context.py)."""

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
