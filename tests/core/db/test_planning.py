"""planned_cursor: one statement under its own planner settings, in one round trip, leaking into nothing after it."""

from contextlib import nullcontext

import pytest
from django.db import DataError, connection, transaction
from django.test.utils import CaptureQueriesContext

from core.db.planning import planned_cursor, planned_parts

SETTINGS = {"enable_sort": "off", "random_page_cost": 7}
SEEN = "SELECT current_setting('enable_sort'), current_setting('random_page_cost'), %(x)s::int"


def _current() -> tuple[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('enable_sort'), current_setting('random_page_cost')")
        return cursor.fetchone()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("enclosed", [False, True])
def test_the_statement_runs_under_the_settings_in_one_round_trip_and_they_end_with_it(enclosed):
    before = _current()
    assert before[0] == "on"
    with transaction.atomic() if enclosed else nullcontext():
        with CaptureQueriesContext(connection) as queries, planned_cursor(SETTINGS) as cursor:
            cursor.execute(SEEN, {"x": 5})
            assert cursor.fetchall() == [("off", "7", 5)]
        # One query string; outside a transaction, not even a BEGIN and a COMMIT with it.
        [sent] = [q["sql"] for q in queries.captured_queries]
        assert planned_parts(sent) == ("SET LOCAL enable_sort = off; SET LOCAL random_page_cost = 7", SEEN % {"x": 5})
        # The transaction's (or the connection's) next statement plans as before.
        assert _current() == before
    assert _current() == before


@pytest.mark.django_db(transaction=True)
def test_a_rowcount_and_a_second_statement():
    with planned_cursor(SETTINGS) as cursor:
        cursor.execute("SELECT generate_series(1, %(n)s)", {"n": 3})
        assert cursor.rowcount == 3
        with pytest.raises(RuntimeError):
            cursor.execute("SELECT 1")


@pytest.mark.django_db(transaction=True)
def test_a_failed_statement_rolls_the_enclosing_transaction_back_settings_included():
    before = _current()
    with pytest.raises(DataError, match="division by zero"), transaction.atomic(), planned_cursor(SETTINGS) as cursor:
        cursor.execute("SELECT 1 / %(zero)s", {"zero": 0})
    assert _current() == before


@pytest.mark.django_db(transaction=True)
def test_a_statement_ending_in_a_comment_does_not_keep_its_settings_in_the_transaction():
    with transaction.atomic():
        with planned_cursor(SETTINGS) as cursor:
            cursor.execute("SELECT current_setting('enable_sort') -- the last line is a comment")
            assert cursor.fetchone() == ("off",)
        assert _current()[0] == "on"


@pytest.mark.django_db(transaction=True)
def test_a_failure_caught_in_a_transaction_still_rolls_it_back():
    with transaction.atomic():
        with pytest.raises(DataError), planned_cursor(SETTINGS) as cursor:
            cursor.execute("SELECT 1 / %(zero)s", {"zero": 0})
        # Django knows the transaction failed: it rolls back, never commits it.
        assert connection.needs_rollback
