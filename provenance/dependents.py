"""The provenance DAG read: Dep(m) by a recursive CTE, why one message depends on another, the invariants' checks."""

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection

from chat.models import LIVE_STATUSES, REMOVED_STATUSES, ContextEdge, Message
from core.db.lookups import BIGINT
from core.errors import NotFound, ValidationFailed
from core.types import User
from provenance.models import DeletionRequest

_MESSAGES = Message._meta.db_table
_DELETIONS = DeletionRequest._meta.db_table
_EDGES = ContextEdge._meta.db_table

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
    ORM's lookups (`core.db.lookups`), instead of failing the array's cast.
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
                CROSS JOIN LATERAL (
                    SELECT target_id FROM {_EDGES}
                    WHERE owner_id = %(owner)s AND source_id = f.id
                    OFFSET 0
                ) e
                WHERE NOT (e.target_id = ANY(w.seen))
                ORDER BY e.target_id, f.pos
            ) first
            ORDER BY first.pos, first.target
            LIMIT %(limit)s - w.found
        ) c
    ) n
    WHERE cardinality(w.frontier) > 0 AND w.found < %(limit)s
      AND (%(depth)s::integer IS NULL OR w.level < %(depth)s::integer)
      AND (%(target)s::bigint IS NULL OR NOT (%(target)s::bigint = ANY(w.seen)))
)
SELECT u.child, u.parent, m.seq, m.role, m.status
FROM walk w
CROSS JOIN LATERAL unnest(w.frontier, w.parents) AS u(child, parent)
JOIN {_MESSAGES} m ON m.owner_id = %(owner)s AND m.id = u.child
WHERE w.level > 0
"""


def _path(parent: dict[int, int], node: int) -> list[int]:
    path = [node]
    while (up := parent.get(path[-1])) is not None:
        path.append(up)
    return path[::-1]


def _walk(
    *, owner_id: int, roots: list[int], depth: int | None, limit: int, target: int | None = None
) -> list[tuple[int, int, int, str, str]]:
    """(message, parent, seq, role, status) of the nearest `limit` messages of the walk, level by level.

    With `target`, the walk stops at the level that reaches it.
    """
    if not roots or limit <= 0:
        return []
    params: dict[str, Any] = {
        "roots": sorted(set(roots)),
        "owner": owner_id,
        "limit": limit,
        "depth": depth,
        "target": target,
    }
    with connection.cursor() as cursor:
        cursor.execute(_WALK_SQL, params)
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
    """The explanation path [m, ..., dependent] of one member of Dep(m) minus m, in one recursive query.

    The same path as `explanation_paths` would give it without its bound (the
    lexicographically smallest shortest path); the walk stops at the level that
    reaches it, and at DELLM_MAX_PATH_LENGTH levels or DELLM_MAX_PATH_WALK
    messages whatever happens (an imported chain can be 100,000 long).
    NotFound when it is not a dependent of m (within `depth`); ValidationFailed
    when it is one, farther than those bounds.
    """
    if not Message.objects.filter(owner=owner, pk=message_id).exists():
        raise NotFound(f"No message with id {message_id}.")
    if not 0 < dependent_id < 2**63:  # no message has such an id (and it is no bigint)
        raise NotFound(f"Message {dependent_id} is not a dependent of message {message_id}.")
    bound = settings.DELLM_MAX_PATH_LENGTH if depth is None else min(depth, settings.DELLM_MAX_PATH_LENGTH)
    rows = _walk(
        owner_id=owner.pk, roots=[message_id], depth=bound, limit=settings.DELLM_MAX_PATH_WALK, target=dependent_id
    )
    parent = {node: up for node, up, *_ in rows}
    if dependent_id in parent:
        return _path(parent, dependent_id)
    if dependent_id != message_id and dependent_id in dep_ids(owner_id=owner.pk, roots=[message_id], depth=depth):
        raise ValidationFailed(
            f"Message {dependent_id} depends on message {message_id} through more than "
            f"{settings.DELLM_MAX_PATH_LENGTH} messages (or past {settings.DELLM_MAX_PATH_WALK} nearer ones): "
            "its path is too long to explain.",
            fields={"dependent_id": "too far"},
        )
    raise NotFound(f"Message {dependent_id} is not a dependent of message {message_id}.")
