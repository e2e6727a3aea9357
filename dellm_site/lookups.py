"""`field__in=[...]` of integers as one array parameter: `field = ANY(%s::bigint[])`.

Django writes `IN (%s, %s, ...)`, one parameter per value; a deletion's
10,000 ids cost 66 ms that way (Django's and the parser's work per value)
against 10 ms as one array, with the same rows and the same plan (PostgreSQL
reads an IN list as `= ANY` of an array). Registered on IntegerField (ids and
every integer column) by `chat.apps`; a subquery, an expression or a value
that is not an integer keeps Django's own lookup.
"""

from __future__ import annotations

from typing import Any

from django.db.models import lookups


class ArrayIn(lookups.In):
    def _integers(self) -> list[int] | None:
        if not self.rhs_is_direct_value():
            return None
        values = {value for value in self.rhs if value is not None}
        if not values or not all(type(value) is int for value in values):
            # None left: Django's lookup matches nothing (EmptyResultSet).
            return None
        return sorted(values)

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, Any]:
        values = self._integers()
        if values is None or connection.vendor != "postgresql":
            return super().as_sql(compiler, connection)
        lhs, lhs_params = self.process_lhs(compiler, connection)
        return f"{lhs} = ANY(%s::bigint[])", (*lhs_params, values)
