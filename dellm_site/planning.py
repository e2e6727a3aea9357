"""A cursor whose statements run under planner settings of their own (`SET LOCAL`), undone after them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from django.db import connection, transaction


@contextmanager
def planned_cursor(settings: Mapping[str, str | int]) -> Iterator[Any]:
    """A cursor with `settings` (name -> value; names and values are ours, never a user's) set for what it runs.

    SET LOCAL needs a transaction and lasts until the outermost one ends: in
    an enclosing transaction the settings are reset after the block, so the
    transaction's later statements do not inherit them. There it sets no
    savepoint: a failed statement leaves the enclosing transaction to roll
    back whole, settings included.
    """
    nested = connection.in_atomic_block
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        cursor.execute("; ".join(f"SET LOCAL {name} = {value}" for name, value in settings.items()))
        yield cursor
        if nested:
            cursor.execute("; ".join(f"RESET {name}" for name in settings))
