"""The embedded PostgreSQL's own log holds no statement and no value: a failing INSERT leaves no words there."""

import uuid

import pytest
from django.db import DataError, IntegrityError, connection, transaction

from dellm_site.embedded import SERVER_LOG_SETTINGS, data_dir

LOG = data_dir() / "pgdata" / "log"


def _fail_with(words: str) -> None:
    """A duplicate-key INSERT with `words` spelt out in its statement, then a cast that quotes them."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE IF NOT EXISTS said (id int PRIMARY KEY, words text)")
        cursor.execute("INSERT INTO said VALUES (1, 'first') ON CONFLICT DO NOTHING")
        with pytest.raises(IntegrityError), transaction.atomic():
            cursor.execute("INSERT INTO said VALUES (1, %s)", [words])
        with pytest.raises(DataError), transaction.atomic():
            cursor.execute("SELECT %s::int", [words])


@pytest.mark.django_db(transaction=True)
def test_a_failing_statement_leaves_no_words_in_the_database_server_log():
    if not LOG.is_file():
        pytest.skip("DATABASE_URL names an external server: its log is the operator's (docs/SECURITY.md, 'Logs')")
    with connection.cursor() as cursor:
        cursor.execute("SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", [list(SERVER_LOG_SETTINGS)])
        assert dict(cursor.fetchall()) == SERVER_LOG_SETTINGS
    start = LOG.stat().st_size
    control, secret = f"Control-{uuid.uuid4().hex}", f"Zanzibar-{uuid.uuid4().hex}"
    # The control: PostgreSQL's defaults, set for this session only, log both the statement and the value,
    # so the log is written and read here, and the same failure would show there.
    with connection.cursor() as cursor:
        cursor.execute("SET log_min_messages = error; SET log_min_error_statement = error")
    try:
        _fail_with(control)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET log_min_messages; RESET log_min_error_statement")
    _fail_with(secret)
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")  # the server has written what it logs of the failures before answering this
    logged = LOG.read_bytes()[start:].decode(errors="replace")
    assert (control in logged, secret in logged) == (True, False)
