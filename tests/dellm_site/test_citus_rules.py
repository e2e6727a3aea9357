"""The live schema follows Citus's rules for tables distributed by `owner_id` (docs/SCALING.md).

Citus itself is not run here: the rules are read from the catalog of the
schema the migrations built. A table distributed by a column can only
enforce a primary key or unique index that includes that column (each shard
checks its own rows), and a foreign key from it must go to a reference table
(copied to every node) or to a colocated distributed table with the
distribution columns paired (both rows on the same shard). A reference or
coordinator-local table cannot reference a distributed one.
"""

from collections.abc import Iterable, Iterator

import pytest
from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext
from pglast import ast, parse_sql
from pglast.enums import A_Expr_Kind, BoolExprType

from tests.helpers import client_for

# The placement docs/SCALING.md describes.
DISTRIBUTED = ("chat_thread", "chat_message", "chat_contextedge", "chat_turn", "provenance_deletionrequest")
REFERENCE = ("auth_user",)
# Small per-owner tables no distributed table references: Citus local tables on the coordinator.
COORDINATOR = (
    "chat_importjob",
    "chat_importupload",
    "chat_memoryread",
    "chat_agentaccess",
    "assistant_agenttoken",
    "provenance_accounterasure",
    "chat_fact",
    "chat_factdecline",
    "chat_factcursor",
)

_UNIQUE_SQL = """
SELECT t.relname, i.relname, ARRAY(SELECT a.attname FROM unnest(x.indkey) k JOIN pg_attribute a
       ON a.attrelid = t.oid AND a.attnum = k)::text[]
FROM pg_index x JOIN pg_class t ON t.oid = x.indrelid JOIN pg_class i ON i.oid = x.indexrelid
WHERE x.indisunique AND t.relname = ANY(%s) AND t.relnamespace = 'public'::regnamespace
ORDER BY t.relname, i.relname
"""

_FOREIGN_SQL = """
SELECT c.conname, src.relname, dst.relname,
       ARRAY(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY k(n, o) JOIN pg_attribute a
             ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.o)::text[],
       ARRAY(SELECT a.attname FROM unnest(c.confkey) WITH ORDINALITY k(n, o) JOIN pg_attribute a
             ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.o)::text[]
FROM pg_constraint c JOIN pg_class src ON src.oid = c.conrelid JOIN pg_class dst ON dst.oid = c.confrelid
-- The constraint as declared: not the copies PostgreSQL makes for each partition.
WHERE c.contype = 'f' AND c.conparentid = 0 AND src.relnamespace = 'public'::regnamespace
ORDER BY c.conname
"""


def citus_violations(*, distributed: Iterable[str], reference: Iterable[str], column: str = "owner_id") -> list[str]:
    """Each way the live schema breaks Citus's rules for `distributed` (by `column`) and `reference` tables."""
    distributed, reference = set(distributed), set(reference)
    found = []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_class c WHERE c.relname = ANY(%s) AND c.relnamespace = 'public'::regnamespace "
            "AND NOT EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = %s AND a.attnotnull)",
            [sorted(distributed), column],
        )
        found += [f"{table}: no NOT NULL distribution column {column}" for (table,) in cursor.fetchall()]
        cursor.execute(_UNIQUE_SQL, [sorted(distributed)])
        found += [
            f"unique index {index} on {table} ({', '.join(columns)}) does not include {column}"
            for table, index, columns in cursor.fetchall()
            if column not in columns
        ]
        cursor.execute(_FOREIGN_SQL)
        keys = cursor.fetchall()
    for name, source, target, columns, referenced in keys:
        link = f"foreign key {name}: {source} ({', '.join(columns)}) -> {target} ({', '.join(referenced)})"
        if source in distributed:
            if target in reference:
                continue
            if target not in distributed:
                found.append(f"{link}: {target} is neither distributed nor a reference table")
            elif (column, column) not in zip(columns, referenced, strict=True):
                found.append(f"{link} does not pair {column} with {column}")
        elif target in distributed:
            kind = "reference" if source in reference else "coordinator-local"
            found.append(f"{link}: a {kind} table cannot reference a distributed one")
    return found


@pytest.fixture
def probe(db):
    """Throwaway tables for the checker (the test's transaction drops them): a reference table of users."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE probe_user (id int PRIMARY KEY)")


def test_a_colocated_schema_follows_the_rules(probe):
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE probe_thread (owner_id int NOT NULL REFERENCES probe_user, id bigint NOT NULL, "
            "source text, PRIMARY KEY (owner_id, id), UNIQUE (owner_id, source))"
        )
        cursor.execute(
            "CREATE TABLE probe_message (owner_id int NOT NULL REFERENCES probe_user, id bigint NOT NULL, "
            "thread_id bigint NOT NULL, PRIMARY KEY (owner_id, id), "
            "FOREIGN KEY (owner_id, thread_id) REFERENCES probe_thread (owner_id, id)) PARTITION BY HASH (owner_id)"
        )
        cursor.execute(
            "CREATE TABLE probe_message_p0 PARTITION OF probe_message FOR VALUES WITH (modulus 2, remainder 0)"
        )
        cursor.execute(
            "CREATE TABLE probe_message_p1 PARTITION OF probe_message FOR VALUES WITH (modulus 2, remainder 1)"
        )
        # A local table may reference a reference table.
        cursor.execute("CREATE TABLE probe_job (id bigint PRIMARY KEY, owner_id int REFERENCES probe_user)")
    assert citus_violations(distributed=["probe_thread", "probe_message"], reference=["probe_user"]) == []


def test_each_broken_rule_is_named_with_its_constraint(probe):
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE probe_thread (owner_id int NOT NULL REFERENCES probe_user, id bigint PRIMARY KEY, "
            "source text, CONSTRAINT probe_thread_source UNIQUE (source))"
        )
        cursor.execute("CREATE TABLE probe_folder (id bigint PRIMARY KEY)")
        cursor.execute(
            "CREATE TABLE probe_message (owner_id int NOT NULL, id bigint NOT NULL, thread_id bigint, "
            "folder_id bigint, "
            "PRIMARY KEY (owner_id, id), "
            "CONSTRAINT probe_message_thread FOREIGN KEY (thread_id) REFERENCES probe_thread (id), "
            "CONSTRAINT probe_message_folder FOREIGN KEY (folder_id) REFERENCES probe_folder (id))"
        )
        cursor.execute(
            "CREATE TABLE probe_read (id bigint PRIMARY KEY, owner_id int, message_id bigint, "
            "CONSTRAINT probe_read_message FOREIGN KEY (owner_id, message_id) REFERENCES probe_message (owner_id, id))"
        )
        cursor.execute("CREATE TABLE probe_loose (id bigint PRIMARY KEY, owner_id int)")
    found = citus_violations(
        distributed=["probe_thread", "probe_message", "probe_loose"], reference=["probe_user", "probe_read"]
    )
    assert found == [
        "probe_loose: no NOT NULL distribution column owner_id",
        "unique index probe_loose_pkey on probe_loose (id) does not include owner_id",
        "unique index probe_thread_pkey on probe_thread (id) does not include owner_id",
        "unique index probe_thread_source on probe_thread (source) does not include owner_id",
        "foreign key probe_message_folder: probe_message (folder_id) -> probe_folder (id): probe_folder is neither "
        "distributed nor a reference table",
        "foreign key probe_message_thread: probe_message (thread_id) -> probe_thread (id) does not pair owner_id "
        "with owner_id",
        "foreign key probe_read_message: probe_read (owner_id, message_id) -> probe_message (owner_id, id): a "
        "reference table cannot reference a distributed one",
    ]


def test_every_table_of_ours_has_a_placement(db):
    ours = {
        model._meta.db_table
        for label in ("chat", "provenance", "assistant")
        for model in apps.get_app_config(label).get_models()
    }
    placed = set(DISTRIBUTED) | set(COORDINATOR) | set(REFERENCE) - {"auth_user"}
    assert sorted(ours - placed) == []  # decide where a new table lives in docs/SCALING.md
    assert sorted(placed - ours) == []


def test_the_product_schema_follows_citus_rules(db):
    # Passes once the per-owner tables are partitioned by owner_id with owner_id in every key.
    assert citus_violations(distributed=DISTRIBUTED, reference=REFERENCE) == []


# --- No cross-owner joins: every per-owner table a product statement reads or writes is pinned to one owner ---

_STATEMENTS = (ast.SelectStmt, ast.InsertStmt, ast.UpdateStmt, ast.DeleteStmt)


def _walk(node: object, *, into_statements: bool) -> Iterator[ast.Node]:
    """`node` and every node below it; below a nested statement only with `into_statements`."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, ast.Node):
            yield item
            if into_statements or item is node or not isinstance(item, _STATEMENTS):
                stack.extend(getattr(item, name) for name in item.__slots__)


def _conjuncts(node: object) -> Iterator[ast.Node]:
    """The terms ANDed together at the top of a condition (a term under OR or NOT pins nothing)."""
    if isinstance(node, ast.BoolExpr) and node.boolop == BoolExprType.AND_EXPR:
        for arg in node.args:
            yield from _conjuncts(arg)
    elif isinstance(node, ast.Node):
        yield node


def _constant(node: object) -> bool:
    while isinstance(node, ast.TypeCast):
        node = node.arg
    return isinstance(node, (ast.A_Const, ast.ParamRef))


def unpinned_tables(statement: str, *, tables: Iterable[str], column: str = "owner_id") -> list[str]:
    """The per-owner `tables` a SQL statement touches without `column` = one value for each (sorted, with alias).

    A table is pinned by `alias.owner_id = <constant>` (or `IN (<one constant>)`)
    among the ANDed terms of its statement's WHERE or a JOIN's ON, by an
    INSERT that sets owner_id, or by `alias.owner_id = other.owner_id` with a
    pinned `other` (what lets PostgreSQL prune every table to one partition and
    Citus route the statement to one shard). A nested statement resolves an
    alias it does not define in the statement around it.
    """
    tables = set(tables)
    parents: dict[int, ast.Node | None] = {}
    scopes: dict[int, dict[str, str]] = {}  # id(statement): {alias: table}
    order = []
    for root in parse_sql(statement):
        for node in _walk(root.stmt, into_statements=True):
            if isinstance(node, _STATEMENTS):
                order.append(node)
                scopes[id(node)] = {}
                parents.setdefault(id(node), None)
                for inner in _walk(node, into_statements=False):
                    if inner is not node and isinstance(inner, _STATEMENTS):
                        parents[id(inner)] = node
                    if isinstance(inner, ast.RangeVar) and inner.relname in tables:
                        scopes[id(node)][inner.alias.aliasname if inner.alias else inner.relname] = inner.relname

    def resolve(scope: ast.Node | None, alias: str) -> tuple[int, str] | None:
        while scope is not None:
            if alias in scopes[id(scope)]:
                return id(scope), alias
            scope = parents[id(scope)]
        return None

    def side(scope: ast.Node, node: object) -> tuple[int, str] | str | None:
        if _constant(node):
            return "constant"
        if isinstance(node, ast.ColumnRef) and getattr(node.fields[-1], "sval", None) == column:
            if len(node.fields) >= 2:
                return resolve(scope, node.fields[-2].sval)
            own = list(scopes[id(scope)])
            return (id(scope), own[0]) if len(own) == 1 else None
        return None

    pinned: set[tuple[int, str]] = set()
    links: list[tuple[tuple[int, str], tuple[int, str]]] = []
    for scope in order:
        if isinstance(scope, ast.InsertStmt) and column in {target.name for target in scope.cols or ()}:
            pinned |= {(id(scope), alias) for alias in scopes[id(scope)]}
        quals = [getattr(scope, "whereClause", None)]
        quals += [n.quals for n in _walk(scope, into_statements=False) if isinstance(n, ast.JoinExpr)]
        for term in (t for qual in quals for t in _conjuncts(qual)):
            if not isinstance(term, ast.A_Expr) or term.name[-1].sval != "=":
                continue
            if term.kind == A_Expr_Kind.AEXPR_IN and len(term.rexpr) == 1:
                right = side(scope, term.rexpr[0])
            elif term.kind == A_Expr_Kind.AEXPR_OP:
                right = side(scope, term.rexpr)
            else:
                continue
            left = side(scope, term.lexpr)
            for this, other in ((left, right), (right, left)):
                if isinstance(this, tuple) and other == "constant":
                    pinned.add(this)
                elif isinstance(this, tuple) and isinstance(other, tuple):
                    links.append((this, other))
    while grown := {b for a, b in links if a in pinned and b not in pinned}:
        pinned |= grown
    return sorted(
        f"{table} {alias}" if alias != table else table
        for scope in order
        for alias, table in scopes[id(scope)].items()
        if (id(scope), alias) not in pinned
    )


PER_OWNER = {"chat_thread", "chat_message", "chat_contextedge", "chat_turn"}


@pytest.mark.parametrize(
    ("sql", "unpinned"),
    [
        ("SELECT id FROM chat_message WHERE owner_id = 5 AND status = 'active'", []),
        ('SELECT "chat_message"."id" FROM "chat_message" WHERE "chat_message"."owner_id" IN (5)', []),
        ("SELECT id FROM chat_message WHERE id = 7", ["chat_message"]),
        ("SELECT id FROM chat_message WHERE owner_id = ANY('{1,2}')", ["chat_message"]),
        ("SELECT id FROM chat_message WHERE owner_id = 5 OR status = 'active'", ["chat_message"]),
        # A join pinned through the owner on both sides, or each side pinned: one shard.
        (
            "SELECT m.id FROM chat_message m JOIN chat_contextedge e ON e.source_id = m.id "
            "AND e.owner_id = m.owner_id WHERE m.owner_id = 5",
            [],
        ),
        (
            "SELECT m.id FROM chat_message m JOIN chat_contextedge e ON e.source_id = m.id "
            "WHERE m.owner_id = 5 AND e.owner_id = 5",
            [],
        ),
        # A cross-owner join: the edge's owner is free.
        (
            "SELECT m.id FROM chat_message m JOIN chat_contextedge e ON e.source_id = m.id WHERE m.owner_id = 5",
            ["chat_contextedge e"],
        ),
        (
            "WITH RECURSIVE dep(id) AS (SELECT id FROM chat_message WHERE owner_id = 5 UNION "
            "SELECT e.target_id FROM chat_contextedge e JOIN dep ON e.source_id = dep.id WHERE e.owner_id = 5) "
            "SELECT id FROM dep",
            [],
        ),
        (
            "SELECT t.id FROM chat_thread t WHERE t.owner_id = 5 AND EXISTS "
            "(SELECT 1 FROM chat_message m WHERE m.thread_id = t.id AND m.owner_id = t.owner_id)",
            [],
        ),
        (
            "SELECT t.id FROM chat_thread t WHERE t.owner_id = 5 AND EXISTS "
            "(SELECT 1 FROM chat_message m WHERE m.thread_id = t.id)",
            ["chat_message m"],
        ),
        ("INSERT INTO chat_message (owner_id, thread_id) VALUES (5, 1)", []),
        ("UPDATE chat_turn SET status = 'done' WHERE id = 3", ["chat_turn"]),
        ("DELETE FROM chat_contextedge WHERE owner_id = 5 AND target_id = 3", []),
    ],
)
def test_unpinned_tables_finds_what_a_statement_leaves_to_any_owner(sql, unpinned):
    assert unpinned_tables(sql, tables=PER_OWNER) == unpinned


def test_product_requests_pin_every_per_owner_table_to_the_owner(owner, thread):
    """A user's chat, search, provenance, graph, deletion and export: each statement names the owner of every
    per-owner table it touches, so each runs on one partition, or one Citus shard.

    The statements are captured as they run (their SQL with the values), so
    the ORM's and the raw SQL's are checked alike. Passes once every product
    query names its owner.
    """
    from chat.turns.run import turn_run
    from chat.turns.start import turn_create

    api = client_for(owner)
    with CaptureQueriesContext(connection) as queries:
        for text in ("I live in Paris", "Where do I live?"):
            turn_run(turn_id=turn_create(thread=thread, content=text, enqueue=False).pk, owner_id=owner.pk)
        first = thread.messages.filter(owner=owner).order_by("seq").first()
        gets = [
            "/api/threads/",
            f"/api/threads/{thread.pk}/",
            f"/api/messages/?thread={thread.pk}",
            "/api/messages/?q=Paris",
            f"/api/messages/{first.pk}/",
            f"/api/messages/{first.pk}/dependents/",
            f"/api/graph/?thread={thread.pk}",
        ]
        for url in gets:
            assert api.get(url).status_code == 200, url
        export = api.get("/api/export/")
        assert export.status_code == 200 and b"".join(export.streaming_content)
        preview = api.post("/api/deletions/", {"select": {"exact": "Paris"}, "mode": "purge"}, format="json")
        assert preview.status_code == 201
        assert api.post(f"/api/deletions/{preview.json()['id']}/confirm/").status_code == 200
        assert api.get("/api/deletions/").status_code == 200
    tables = set(DISTRIBUTED)
    found = {
        " ".join(query["sql"].split())[:300]: unpinned
        for query in queries.captured_queries
        if (unpinned := unpinned_tables(query["sql"], tables=tables))
    }
    assert found == {}
