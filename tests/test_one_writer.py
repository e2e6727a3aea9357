"""The one-writer rule, checked by parsing every product and lab module.

Only `chat/writer/` (and migrations) may create, update or delete `Message`
or `ContextEdge` rows: through the ORM (`create`, `bulk_create`, `update`,
`delete`, `save`, `bulk_update`, `update_or_create`, `get_or_create` on these
models, their querysets, their related managers, or a name bound to one of
those) or in raw SQL (a string that INSERTs into, UPDATEs, DELETEs from,
COPYs into or TRUNCATEs their tables, or a table the checker cannot name in
a module that uses these models). A violation names its file and line.
"""

import ast
import re
from pathlib import Path

import pytest

from chat.models import ContextEdge, Message

ROOT = Path(__file__).resolve().parent.parent
APPS = ("assistant", "chat", "provenance", "dellm_site", "lab")
WRITER = Path("chat/writer")
MODELS = {"Message", "ContextEdge"}
# Related managers that reach these rows from a thread, a user or a message.
RELATED = {"messages", "in_edges", "out_edges"}
WRITES = {"create", "bulk_create", "update", "delete", "save", "bulk_update", "update_or_create", "get_or_create"}
TABLES = {Message._meta.db_table, ContextEdge._meta.db_table}
UNKNOWN = "{?}"
OTHER = "{other}"
SQL_WRITE = re.compile(r"\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM|COPY|TRUNCATE(?:\s+TABLE)?)\s+(?:ONLY\s+)?(\S+)", re.I)


def _chain(node: ast.AST) -> tuple[str | None, set[str]]:
    """The name an expression starts from (`Message` in `Message.objects.filter(...)`) and the attributes on the way."""
    attrs: set[str] = set()
    while True:
        if isinstance(node, ast.Attribute):
            attrs.add(node.attr)
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Name):
            return node.id, attrs
        else:
            return None, attrs


def _names(target: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def _own_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of a module or function, without those of the functions defined in it."""
    nodes, stack = [], list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        nodes.append(node)
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            stack.extend(ast.iter_child_nodes(node))
    return nodes


def _bindings(nodes: list[ast.AST]) -> list[tuple[list[str], ast.AST]]:
    """(names bound, the expression they are bound from) for assignments, loops, comprehensions, with."""
    found = []
    for node in nodes:
        if isinstance(node, ast.Assign):
            found += [(_names(target), node.value) for target in node.targets]
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and node.value is not None:
            found.append((_names(node.target), node.value))
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            found.append((_names(node.target), node.iter))
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            found.append((_names(node.optional_vars), node.context_expr))
    return found


def _bound(nodes: list[ast.AST], inherited: set[str]) -> set[str]:
    """Names bound to these models' rows, querysets or managers in one scope, to a fixpoint."""
    bound = set(inherited)
    bindings = _bindings(nodes)
    changed = True
    while changed:
        changed = False
        for names, value in bindings:
            root, attrs = _chain(value)
            if (root in MODELS or root in bound or attrs & RELATED) and not set(names) <= bound:
                bound.update(names)
                changed = True
    return bound


def _table_names(tree: ast.AST) -> dict[str, str]:
    """Module names bound to `X._meta.db_table`: the table if X is one of ours, else OTHER."""
    tables: dict[str, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            pairs = (
                zip(target.elts, node.value.elts, strict=False)
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple)
                else [(target, node.value)]
            )
            for name, value in pairs:
                if isinstance(name, ast.Name) and (table := _table_of(value, {})) not in (None, UNKNOWN):
                    tables[name.id] = table
    return tables


def _table_of(node: ast.AST, tables: dict[str, str]) -> str | None:
    """The table an interpolated expression names; UNKNOWN when it cannot be told."""
    if isinstance(node, ast.Attribute) and node.attr == "db_table":
        model = node.value.value if isinstance(node.value, ast.Attribute) else None
        if isinstance(model, ast.Name):
            return {"Message": Message._meta.db_table, "ContextEdge": ContextEdge._meta.db_table}.get(model.id, OTHER)
        return UNKNOWN
    if isinstance(node, ast.Name) and node.id in tables:
        return tables[node.id]
    return UNKNOWN


def _sql_text(node: ast.AST, tables: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue):
                parts.append(_table_of(value.value, tables) or UNKNOWN)
        return "".join(parts)
    return None


def violations(source: str) -> list[tuple[int, str]]:
    """(line, what) for each write of a Message or ContextEdge row in `source`."""
    tree = ast.parse(source)
    uses_models = any(isinstance(n, ast.Name) and n.id in MODELS for n in ast.walk(tree))
    found = []
    tables = _table_names(tree)
    module = _bound(_own_nodes(tree), set())
    for scope in [
        tree,
        *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)),
    ]:
        nodes = _own_nodes(scope)
        bound = module if scope is tree else _bound(nodes, module)
        for node in nodes:
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITES:
                root, attrs = _chain(node.func.value)
                if root in MODELS or root in bound or attrs & RELATED:
                    found.append((node.lineno, f".{node.func.attr}() on {root}"))
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr | ast.Constant):
            text = _sql_text(node, tables)
            for match in SQL_WRITE.finditer(text or ""):
                table = match.group(1).strip('"();').lower()
                if table in TABLES or (table == UNKNOWN.lower() and uses_models):
                    found.append((node.lineno, f"SQL {match.group(0)!r}"))
    return sorted(found)


def _modules() -> list[Path]:
    paths = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if "migrations" in relative.parts or relative.is_relative_to(WRITER):
                continue
            paths.append(relative)
    return paths


def test_only_the_writer_writes_messages_and_edges():
    modules = _modules()
    assert Path("chat/services.py") in modules and Path("lab/bench/seed.py") in modules
    found = [f"{path}:{line}: {what}" for path in modules for line, what in violations((ROOT / path).read_text())]
    assert found == []


@pytest.mark.parametrize(
    ("snippet", "expected"),
    [
        ("Message.objects.create(owner_id=1)", [(1, ".create() on Message")]),
        ("Message.objects.filter(pk=1).update(status='active')", [(1, ".update() on Message")]),
        ("ContextEdge.objects.bulk_create(rows)", [(1, ".bulk_create() on ContextEdge")]),
        ("qs = Message.objects.filter(pk=1)\nrows = qs.exclude(x=1)\nrows.delete()", [(3, ".delete() on rows")]),
        ("m = Message(owner_id=1)\nm.save()", [(2, ".save() on m")]),
        ("def f():\n    m = Message.objects.get(pk=1)\n    m.delete()", [(3, ".delete() on m")]),
        ("rows = Message.objects.all()\ndef f():\n    rows.update(status='x')", [(3, ".update() on rows")]),
        ("for m in Message.objects.all():\n    m.save(update_fields=['status'])", [(2, ".save() on m")]),
        ("thread.messages.get_or_create(seq=1)", [(1, ".get_or_create() on thread")]),
        ("message.out_edges.all().delete()", [(1, ".delete() on message")]),
        ("Message.objects.bulk_update(rows, ['status'])", [(1, ".bulk_update() on Message")]),
        (
            'cursor.execute(f"UPDATE {Message._meta.db_table} SET content = %s", [x])',
            [(1, "SQL 'UPDATE chat_message'")],
        ),
        (
            'EDGES = ContextEdge._meta.db_table\nsql = f"INSERT INTO {EDGES} (a) VALUES (1)"',
            [(2, "SQL 'INSERT INTO chat_contextedge'")],
        ),
        (
            'A, B = Thread._meta.db_table, Message._meta.db_table\nq = f"DELETE FROM {B} WHERE x"',
            [(2, "SQL 'DELETE FROM chat_message'")],
        ),
        ('q = "copy chat_message (id) FROM STDIN"', [(1, "SQL 'copy chat_message'")]),
        ('q = "TRUNCATE TABLE chat_contextedge"', [(1, "SQL 'TRUNCATE TABLE chat_contextedge'")]),
        ('Message\nq = f"DELETE FROM {table} WHERE x"', [(2, "SQL 'DELETE FROM {?}'")]),
    ],
)
def test_the_checker_finds_a_planted_write(snippet, expected):
    assert violations(snippet) == expected


@pytest.mark.parametrize(
    "snippet",
    [
        "Message.objects.filter(pk=1).values_list('pk', flat=True)",
        "Thread.objects.filter(pk=1).update(updated_at=now)",
        "Turn.objects.create(owner_id=1)",
        "status = {}\nstatus.update({'a': 1})",
        "def f():\n    row = Message.objects.first()\ndef g():\n    row = Turn.objects.filter()\n    row.update(x=1)",
        'q = f"DELETE FROM {Thread._meta.db_table} WHERE owner_id = %s"',
        'q = f"DELETE FROM {table} WHERE x"',
        'q = "SELECT id FROM chat_message FOR UPDATE"',
        'q = f"VACUUM ANALYZE {Message._meta.db_table}"',
        "message_store(owner_id=1, thread_id=2, role='user', content='hi')",
    ],
)
def test_the_checker_leaves_reads_and_other_tables_alone(snippet):
    assert violations(snippet) == []
