"""The owner's lock: one statement per transaction, and held exactly as long as PostgreSQL holds it."""

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from core.db.locks import owner_lock

pytestmark = pytest.mark.django_db(transaction=True)


def _statements(owner_id: int) -> int:
    with CaptureQueriesContext(connection) as queries:
        owner_lock(owner_id)
    return sum("pg_advisory_xact_lock" in query["sql"] for query in queries.captured_queries)


def _held() -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT objid FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()")
        return {int(objid) for (objid,) in cursor.fetchall()}


def test_a_transaction_takes_an_owners_lock_once():
    with transaction.atomic():
        assert (_statements(7), _statements(7), _statements(8)) == (1, 0, 1)
        with transaction.atomic():
            assert _statements(7) == 0
        assert _held() == {7, 8}
    with transaction.atomic():
        assert _held() == set()
        assert _statements(7) == 1


def test_a_lock_released_with_its_savepoint_or_transaction_is_taken_again():
    with transaction.atomic():
        owner_lock(7)
        with pytest.raises(RuntimeError), transaction.atomic():
            owner_lock(9)
            raise RuntimeError
        # PostgreSQL released the lock taken in the savepoint rolled back; the one before it stays.
        assert _held() == {7}
        assert (_statements(9), _statements(7)) == (1, 0)
    with pytest.raises(RuntimeError), transaction.atomic():
        owner_lock(7)
        raise RuntimeError
    with transaction.atomic():
        assert _statements(7) == 1


def test_the_lock_needs_a_transaction():
    with pytest.raises(RuntimeError, match=r"inside transaction\.atomic\(\)"):
        owner_lock(7)
