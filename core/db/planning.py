"""One statement run under planner settings of its own (`SET LOCAL`), undone after it, in one round trip."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import Any

from django.db import connection, transaction


def planned_parts(sent: str) -> tuple[str, str]:
    """A query string as a planned cursor sent it, split: its settings ("SET LOCAL ...", or "") and its statement.

    For a reader of captured queries (EXPLAIN takes one statement). The
    string is "SET LOCAL a = 1; SET LOCAL b = off; <statement>", then
    "\n; RESET a; RESET b" in a transaction.
    """
    settings, statement = [], sent
    while statement.startswith("SET LOCAL "):
        setting, _, statement = statement.partition("; ")
        settings.append(setting)
    head, reset, names = statement.rpartition("\n; RESET ")
    if settings and reset and all(_is_name(name.removeprefix("RESET ")) for name in names.split("; ")):
        statement = head
    return "; ".join(settings), statement


def _is_name(text: str) -> bool:
    return text.replace(".", "").replace("_", "").isalnum()


class _Planned:
    """A cursor that runs one statement, sent with the settings before it and their reset after it."""

    def __init__(self, cursor: Any, settings: Mapping[str, str | int], reset: bool):
        self._cursor = cursor
        self._settings = len(settings)
        self._before = "".join(f"SET LOCAL {name} = {value}; " for name, value in settings.items())
        # On a line of its own: a statement that ends in a comment does not swallow it.
        self._after = ("\n; " + "; ".join(f"RESET {name}" for name in settings)) if reset else ""
        self._sent = False

    def execute(self, sql: str, params: Any = None) -> None:
        if self._sent:
            raise RuntimeError("A planned cursor runs one statement; open another for the next.")
        self._sent = True
        # One query string, so one round trip (the client binds the parameters, as
        # Django's psycopg cursors do unless server_side_binding is set); each
        # statement has its own result, and the cursor is moved on to the statement's.
        self._cursor.execute(f"{self._before}{sql.strip().rstrip(';')}{self._after}", params)
        for _ in range(self._settings):
            self._cursor.nextset()

    def fetchone(self) -> Any:
        return self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount


@contextmanager
def planned_cursor(settings: Mapping[str, str | int]) -> Iterator[_Planned]:
    """A cursor for one statement with `settings` (name -> value; names and values are ours, never a user's) set.

    Settings and statement go as one query string. SET LOCAL lasts until the
    transaction ends. Outside one, the query string is a transaction of its
    own (PostgreSQL runs the statements of one simple query as one), so the
    settings end with the statement, and no BEGIN or COMMIT is sent. In an
    enclosing transaction they are reset right after the statement, in the
    same string, so the transaction's later statements do not inherit them;
    there no savepoint is set, and a failed statement marks that transaction
    to roll back whole, settings included.
    """
    in_transaction = not connection.get_autocommit()
    with connection.cursor() as cursor, transaction.atomic(savepoint=False) if in_transaction else nullcontext():
        yield _Planned(cursor, settings, reset=in_transaction)
