"""The one-writer rule, checked by parsing every product and lab module.

Only `chat/writer/` (and migrations) may create, update or delete `Message`
or `ContextEdge` rows: through the ORM (`create`, `bulk_create`, `update`,
`delete`, `save`, `bulk_update`, `update_or_create`, `get_or_create` and
their async forms `acreate` ... `aget_or_create` on these models, under any
name they are imported as, their querysets, their related managers, a
turn's foreign keys to its messages, or a name bound to one of those) or in
raw SQL (a string that INSERTs into, UPDATEs, DELETEs from, MERGEs into,
COPYs into or TRUNCATEs their tables, schema-qualified or not, or a table
the checker cannot name in a module that uses these models: an f-string,
`str.format`, `%`, `+` or psycopg's `sql.SQL(...).format(...)` whose table
is not a known other table). A product module (not the lab's teardown of
benchmark users) deletes no thread and no user through the ORM either: their
messages would go with them by Django's cascade, past the writer and the
eraser (raw SQL cannot: the foreign keys refuse it). A violation names its
file and line.
"""

import ast
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from chat.models import ContextEdge, Message
from tests.helpers import ROOT

APPS = ("core", "assistant", "chat", "provenance", "dellm_site", "lab")
# The research harness drops whole benchmark users (and their history) when it is done with them.
TEARDOWN_ALLOWED = ("lab",)
WRITER = Path("chat/writer")
MODELS = {"Message", "ContextEdge"}
# Deleting one of these deletes its messages (on_delete=CASCADE).
CASCADES = {"Thread", "User", "get_user_model"}
# Attributes that reach these rows from a thread, a user, a message or a turn
# (`turn.reply.save()`): related managers and Turn's foreign keys to Message.
# `message.turns` reaches turns, not messages: what it writes is a Turn's own
# row (Turn.objects.create is allowed too), and a message behind it is reached
# by one of the foreign keys below (`message.turns.first().reply.save()`).
RELATED = {"messages", "in_edges", "out_edges", "user_message", "reply", "system_message"}
# A thread or user reached from something else (`message.thread.delete()`, `request.user.delete()`).
CASCADE_RELATED = {"thread", "owner", "user"}
WRITES = {"create", "bulk_create", "update", "delete", "save", "bulk_update", "update_or_create", "get_or_create"}
WRITES |= {f"a{name}" for name in WRITES}
DELETES = {"delete", "adelete"}
TABLES = {Message._meta.db_table, ContextEdge._meta.db_table}
UNKNOWN = "{?}"
OTHER = "{other}"
# A write and the table it names: nothing (the table is appended later) counts as unknown.
# "FOR UPDATE", "FOR NO KEY UPDATE", "ON CONFLICT ... DO UPDATE" and "ON UPDATE" lock or cascade; they write no table.
SQL_WRITE = re.compile(
    r"(?<!\bFOR )(?<!\bKEY )(?<!\bDO )(?<!\bON )"
    r"\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM|MERGE\s+INTO|COPY|TRUNCATE(?:\s+TABLE)?)"
    r"(?:\s+ONLY)?(?:\s+([^\s(),;]+)|\s*$)",
    re.I,
)
PLACEHOLDER = re.compile(r"\{([^{}!:]*)[^{}]*\}")
PERCENT = re.compile(r"%%|%\((\w+)\)s|%s")


def _chain(node: ast.AST) -> tuple[str | None, set[str]]:
    """The name an expression starts from (`Message` in `Message.objects.filter(...)`) and the attributes on the way."""
    attrs: set[str] = set()
    while True:
        if isinstance(node, ast.Attribute):
            attrs.add(node.attr)
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Subscript | ast.Await):
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


Reaches = Callable[[str | None, set[str], set[str]], bool]


def _bound(nodes: list[ast.AST], inherited: set[str], reaches: Reaches) -> set[str]:
    """Names bound to what `reaches` (rows, querysets or managers) in one scope, to a fixpoint."""
    bound = set(inherited)
    bindings = _bindings(nodes)
    changed = True
    while changed:
        changed = False
        for names, value in bindings:
            root, attrs = _chain(value)
            if reaches(root, attrs, bound) and not set(names) <= bound:
                bound.update(names)
                changed = True
    return bound


def _aliases(tree: ast.AST) -> dict[str, str]:
    """{local name: model} for the models and cascading names as imported (`from chat.models import Message as M`)."""
    aliases = {name: name for name in MODELS | CASCADES}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            aliases.update({a.asname: a.name for a in node.names if a.asname and a.name in MODELS | CASCADES})
    return aliases


def _model(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """`Message` for `Message`, `M` imported as it, or `chat.models.Message`."""
    if isinstance(node, ast.Name):
        return aliases.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _table_names(tree: ast.AST, aliases: dict[str, str]) -> dict[str, str]:
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
                if isinstance(name, ast.Name) and (table := _table_of(value, {}, aliases)) not in (None, UNKNOWN):
                    tables[name.id] = table
    return tables


def _table_of(node: ast.AST, tables: dict[str, str], aliases: dict[str, str]) -> str:
    """The table an interpolated expression names; UNKNOWN when it cannot be told."""
    if isinstance(node, ast.Attribute) and node.attr == "db_table":
        model = _model(node.value.value, aliases) if isinstance(node.value, ast.Attribute) else None
        if model is None:
            return UNKNOWN
        return {"Message": Message._meta.db_table, "ContextEdge": ContextEdge._meta.db_table}.get(model, OTHER)
    if isinstance(node, ast.Name) and node.id in tables:
        return tables[node.id]
    return UNKNOWN


class _Sql:
    """The text of string expressions, each part the checker cannot read replaced by UNKNOWN or the table it names."""

    def __init__(self, tables: dict[str, str], aliases: dict[str, str]) -> None:
        self.tables, self.aliases = tables, aliases

    def text(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, str) else None
        if isinstance(node, ast.JoinedStr):
            return "".join(
                str(v.value) if isinstance(v, ast.Constant) else self.part(v.value)
                for v in node.values
                if isinstance(v, ast.Constant | ast.FormattedValue)
            )
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.text(node.left), self.text(node.right)
            if left is None and right is None:
                return None
            return (left if left is not None else self.part(node.left)) + (
                right if right is not None else self.part(node.right)
            )
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            template = self.text(node.left)
            return None if template is None else self.percent(template, node.right)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
            template = self.text(node.func.value)
            if template is None:
                return None
            keywords = {k.arg: k.value for k in node.keywords if k.arg is not None}
            return self.format(template, node.args, keywords)
        if isinstance(node, ast.Call) and self._callee(node) == "SQL" and node.args:
            return self.text(node.args[0])
        return None

    @staticmethod
    def _callee(node: ast.Call) -> str | None:
        func = node.func
        return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None

    def part(self, node: ast.AST) -> str:
        """What an expression put into SQL names: a string's text, an `Identifier`'s name, a known table, or UNKNOWN."""
        text = self.text(node)
        if text is not None:
            return text
        if isinstance(node, ast.Call) and self._callee(node) == "Identifier":
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            return ".".join(names) if names and len(names) == len(node.args) else UNKNOWN
        return _table_of(node, self.tables, self.aliases)

    def format(self, template: str, args: list[ast.expr], keywords: dict[str, ast.expr]) -> str:
        positional = iter(args)

        def one(match: re.Match[str]) -> str:
            key = match.group(1)
            if key == "":
                value = next(positional, None)
            elif key.isdigit():
                value = args[int(key)] if int(key) < len(args) else None
            else:
                value = keywords.get(key)
            return UNKNOWN if value is None or isinstance(value, ast.Starred) else self.part(value)

        return PLACEHOLDER.sub(one, template)

    def percent(self, template: str, right: ast.expr) -> str:
        args: list[ast.expr] = []
        keywords: dict[str, ast.expr] = {}
        if isinstance(right, ast.Dict):
            pairs = zip(right.keys, right.values, strict=True)
            keywords = {k.value: v for k, v in pairs if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        else:
            args = right.elts if isinstance(right, ast.Tuple) else [right]
        positional = iter(args)

        def one(match: re.Match[str]) -> str:
            if match.group(0) == "%%":
                return "%"
            value = keywords.get(match.group(1)) if match.group(1) else next(positional, None)
            return UNKNOWN if value is None else self.part(value)

        return PERCENT.sub(one, template)


def _sql_table(token: str | None) -> str:
    """The table a statement names, unquoted and without its schema; UNKNOWN for none or a placeholder."""
    if not token:
        return UNKNOWN
    name = token.replace('"', "").lower().rsplit(".", 1)[-1]
    if name in (UNKNOWN, OTHER):
        return name
    return UNKNOWN if "{" in name or "%" in name else name


def violations(source: str, *, product: bool = True) -> list[tuple[int, str]]:
    """(line, what) for each write of a Message or ContextEdge row in `source` (and, in a product module, each
    deletion of a thread or user)."""
    tree = ast.parse(source)
    aliases = _aliases(tree)
    models = {name for name, model in aliases.items() if model in MODELS}
    cascades = {name for name, model in aliases.items() if model in CASCADES}
    uses_models = any(
        (isinstance(n, ast.Name) and n.id in models) or (isinstance(n, ast.Attribute) and n.attr in MODELS)
        for n in ast.walk(tree)
    )

    def writes(root: str | None, attrs: set[str], bound: set[str]) -> bool:
        return root in models or root in bound or bool(attrs & (RELATED | MODELS))

    def deletes(root: str | None, attrs: set[str], bound: set[str]) -> bool:
        return root in cascades or root in bound or "threads" in attrs or bool(attrs & CASCADES)

    found = []
    tables = _table_names(tree, aliases)
    module_nodes = _own_nodes(tree)
    module = _bound(module_nodes, set(), writes)
    module_cascades = _bound(module_nodes, set(), deletes)
    for scope in [
        tree,
        *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)),
    ]:
        nodes = _own_nodes(scope)
        bound = module if scope is tree else _bound(nodes, module, writes)
        bound_cascades = module_cascades if scope is tree else _bound(nodes, module_cascades, deletes)
        for node in nodes:
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            method, receiver = node.func.attr, node.func.value
            root, attrs = _chain(receiver)
            if method in WRITES and writes(root, attrs, bound):
                found.append((node.lineno, f".{method}() on {root}"))
            elif (
                product
                and method in DELETES
                and (
                    deletes(root, attrs, bound_cascades)
                    or (isinstance(receiver, ast.Attribute) and receiver.attr in CASCADE_RELATED)
                )
            ):
                found.append((node.lineno, f".{method}() on {root} (its messages go by cascade)"))
    sql = _Sql(tables, aliases)
    read: set[int] = set()
    for node in ast.walk(tree):  # outermost first: a string expression is read whole, once
        if id(node) in read or (text := sql.text(node)) is None:
            continue
        read.update(id(n) for n in ast.walk(node))
        for match in SQL_WRITE.finditer(text):
            table = _sql_table(match.group(1))
            if table in TABLES or (table == UNKNOWN and uses_models):
                found.append((node.lineno, f"SQL {match.group(0).strip()!r}"))
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
    assert Path("chat/turns/run.py") in modules and Path("lab/bench/seed.py") in modules
    found = [
        f"{path}:{line}: {what}"
        for path in modules
        for line, what in violations((ROOT / path).read_text(), product=path.parts[0] not in TEARDOWN_ALLOWED)
    ]
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
        # Async ORM writes.
        ("await Message.objects.acreate(owner_id=1)", [(1, ".acreate() on Message")]),
        ("await Message.objects.filter(pk=1).aupdate(status='x')", [(1, ".aupdate() on Message")]),
        ("await ContextEdge.objects.filter(pk=1).adelete()", [(1, ".adelete() on ContextEdge")]),
        ("async def f():\n    m = await Message.objects.aget(pk=1)\n    await m.asave()", [(3, ".asave() on m")]),
        ("await ContextEdge.objects.abulk_create(rows)", [(1, ".abulk_create() on ContextEdge")]),
        ("await Message.objects.abulk_update(rows, ['status'])", [(1, ".abulk_update() on Message")]),
        ("await thread.messages.aupdate_or_create(seq=1)", [(1, ".aupdate_or_create() on thread")]),
        ("await Message.objects.aget_or_create(seq=1)", [(1, ".aget_or_create() on Message")]),
        # A turn's foreign keys to its messages.
        ("turn.user_message.save()", [(1, ".save() on turn")]),
        ("turn.reply.delete()", [(1, ".delete() on turn")]),
        ("await turn.system_message.asave(update_fields=['content'])", [(1, ".asave() on turn")]),
        ("reply = turn.reply\nreply.save()", [(2, ".save() on reply")]),
        ("message.turns.first().reply.save()", [(1, ".save() on message")]),
        # Import aliases.
        ("from chat.models import Message as M\nM.objects.filter(pk=1).update(status='x')", [(2, ".update() on M")]),
        ("import chat.models as cm\ncm.ContextEdge.objects.create()", [(2, ".create() on cm")]),
        (
            'from chat.models import Message as M\nq = f"DELETE FROM {M._meta.db_table}"',
            [(2, "SQL 'DELETE FROM chat_message'")],
        ),
        # SQL whose table is built at run time, schema-qualified, or merged into.
        ('Message\nq = "UPDATE {} SET content = %s".format(table)', [(2, "SQL 'UPDATE {?}'")]),
        ('Message\nq = "DELETE FROM {t} WHERE x".format(t=table)', [(2, "SQL 'DELETE FROM {?}'")]),
        ('q = "UPDATE {} SET x = 1".format(Message._meta.db_table)', [(1, "SQL 'UPDATE chat_message'")]),
        ('Message\nq = "DELETE FROM %s WHERE id = 1" % table', [(2, "SQL 'DELETE FROM {?}'")]),
        ('Message\nq = "INSERT INTO %(t)s (a) VALUES (1)" % {"t": table}', [(2, "SQL 'INSERT INTO {?}'")]),
        ('Message\nq = "UPDATE " + table + " SET x = 1"', [(2, "SQL 'UPDATE {?}'")]),
        ('q = "DELETE FROM " + "chat_" + "message"', [(1, "SQL 'DELETE FROM chat_message'")]),
        ('Message\nPREFIX = "DELETE FROM "', [(2, "SQL 'DELETE FROM'")]),
        (
            'q = sql.SQL("UPDATE {} SET x = 1").format(sql.Identifier("chat_message"))',
            [(1, "SQL 'UPDATE chat_message'")],
        ),
        (
            'q = SQL("DELETE FROM {t}").format(t=Identifier("public", "chat_contextedge"))',
            [(1, "SQL 'DELETE FROM public.chat_contextedge'")],
        ),
        ('Message\nq = sql.SQL("UPDATE {} SET x = 1").format(sql.Identifier(name))', [(2, "SQL 'UPDATE {?}'")]),
        ('Message\nq = sql.SQL("TRUNCATE ") + sql.Identifier(name)', [(2, "SQL 'TRUNCATE {?}'")]),
        ('q = "UPDATE public.chat_message SET x = 1"', [(1, "SQL 'UPDATE public.chat_message'")]),
        ('q = \'DELETE FROM "public"."chat_message"\'', [(1, 'SQL \'DELETE FROM "public"."chat_message"\'')]),
        ('q = "INSERT INTO chat_message(id, seq) VALUES (1, 2)"', [(1, "SQL 'INSERT INTO chat_message'")]),
        ('q = "MERGE INTO chat_contextedge e USING x ON true"', [(1, "SQL 'MERGE INTO chat_contextedge'")]),
        ('q = "UPDATE ONLY chat_message SET x = 1"', [(1, "SQL 'UPDATE ONLY chat_message'")]),
        # Deleting a thread or a user deletes its messages by cascade.
        ("Thread.objects.filter(pk=1).delete()", [(1, ".delete() on Thread (its messages go by cascade)")]),
        (
            "thread = Thread.objects.get(pk=1)\nthread.delete()",
            [(2, ".delete() on thread (its messages go by cascade)")],
        ),
        ("await owner.threads.all().adelete()", [(1, ".adelete() on owner (its messages go by cascade)")]),
        (
            "get_user_model().objects.filter(pk=1).delete()",
            [(1, ".delete() on get_user_model (its messages go by cascade)")],
        ),
        (
            "from django.contrib.auth.models import User as U\nU.objects.all().delete()",
            [(2, ".delete() on U (its messages go by cascade)")],
        ),
        ("request.user.delete()", [(1, ".delete() on request (its messages go by cascade)")]),
        ("message.thread.delete()", [(1, ".delete() on message (its messages go by cascade)")]),
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
        # A turn's own row, reached from its message.
        "message.turns.filter(status='running').update(status='failed')",
        "turn = message.turns.first()\nturn.save(update_fields=['status'])",
        'q = "SELECT id FROM chat_message WHERE owner_id = %s FOR NO KEY UPDATE"',
        'q = "INSERT INTO chat_turn (a) VALUES (1) ON CONFLICT (a) DO UPDATE SET a = 2"',
        'Message\nq = "UPDATE {} SET x = 1".format(Thread._meta.db_table)',
        'Message\nq = sql.SQL("DELETE FROM {} WHERE x").format(sql.Identifier("chat_thread"))',
        'Message\nq = sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(name))',
        'Message\nq = sql.SQL("REINDEX INDEX CONCURRENTLY {}").format(sql.Identifier(name))',
        'Message\nq = "UPDATE " + THREADS + " SET x = 1"\nTHREADS = Thread._meta.db_table',
        "ImportUpload.objects.filter(job_id=1).delete()",
        "AuthToken.objects.filter(user_id=request.user.pk).delete()",
        "request.auth.delete()",
    ],
)
def test_the_checker_leaves_reads_and_other_tables_alone(snippet):
    assert violations(snippet) == []


def test_the_lab_may_drop_its_benchmark_users():
    assert violations("get_user_model().objects.filter(pk__in=ids).delete()", product=False) == []
    assert violations("Message.objects.filter(pk=1).delete()", product=False) == [(1, ".delete() on Message")]
