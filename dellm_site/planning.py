"""One statement run under planner settings of its own (`SET LOCAL`), undone after it, in one round trip."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from django.db import connection


def planned_parts(sent: str) -> tuple[str, str]:
    """A query string as a planned cursor sent it, split: its settings ("SET LOCAL ...", or "") and its statement.

    For a reader of captured queries (EXPLAIN takes one statement). The
    string is "SET LOCAL a = 1; SET LOCAL b = off; <statement>", then
    "; RESET a; RESET b" in a transaction.
    """
    settings, statement = [], sent
    while statement.startswith("SET LOCAL "):
        setting, _, statement = statement.partition("; ")
        settings.append(setting)
    while settings:
        head, reset, name = statement.rpartition("; RESET ")
        if not reset or not name.replace(".", "").replace("_", "").isalnum():
            break
        statement = head
    return "; ".join(settings), statement


class _Planned:
    """A cursor that runs one statement, sent with the settings before it and their reset after it."""

    def __init__(self, cursor: Any, settings: Mapping[str, str | int], reset: bool):
        self._cursor = cursor
        self._before = [f"SET LOCAL {name} = {value}" for name, value in settings.items()]
        self._after = [f"RESET {name}" for name in settings] if reset else []
        self._sent = False

    def execute(self, sql: str, params: Any = None) -> None:
        if self._sent:
            raise RuntimeError("A planned cursor runs one statement; open another for the next.")
        self._sent = True
        # One query string, so one round trip (the client binds the parameters:
        # Django's psycopg cursors do); each statement has its own result, and the
        # cursor is moved on to the statement's.
        self._cursor.execute("; ".join([*self._before, sql.strip().rstrip(";"), *self._after]), params)
        for _ in self._before:
            self._cursor.nextset()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


@contextmanager
def planned_cursor(settings: Mapping[str, str | int]) -> Iterator[Any]:
    """A cursor for one statement with `settings` (name -> value; names and values are ours, never a user's) set.

    Settings and statement go as one query string. SET LOCAL lasts until the
    transaction ends. Outside one, the query string is a transaction of its
    own (PostgreSQL runs the statements of one simple query as one), so the
    settings end with the statement, and no BEGIN or COMMIT is sent. In an
    enclosing transaction they are reset right after the statement, in the
    same string, so the transaction's later statements do not inherit them;
    a failed statement leaves that transaction to roll back whole, settings
    included (no savepoint is set).
    """
    with connection.cursor() as cursor:
        yield _Planned(cursor, settings, reset=not connection.get_autocommit())
