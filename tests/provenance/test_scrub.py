"""Purged text leaves PostgreSQL's statistics and full-text index too (issue 13, finding 5)."""

from pathlib import Path

import pytest
from django.db import connection

from provenance import services
from provenance.scrub import SEARCH_INDEX, search_index_rebuild
from tests.factories import make_message

SECRET = "zanzibar quokkas hide my locker code 918273"
KEPT = "walrus"
COLUMNS = ("content", "search", "embedding")


def _statistics() -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attname, most_common_vals::text, histogram_bounds::text, most_common_elems::text "
            "FROM pg_stats WHERE tablename = 'chat_message' AND attname = ANY(%s)",
            [list(COLUMNS)],
        )
        return cursor.fetchall()


def _purge(owner, phrase: str) -> None:
    preview = services.deletion_preview(owner=owner, actor=owner, exact=phrase, mode="purge")
    services.deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)


@pytest.mark.django_db(transaction=True)
def test_planner_statistics_never_hold_message_text(owner, thread):
    for n in range(8):
        make_message(thread, f"{SECRET} {n}")
        make_message(thread, f"{KEPT} {n}")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE chat_message")
    assert _statistics() == []
    _purge(owner, "918273")  # its own VACUUM (ANALYZE) runs here
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE chat_message")
    assert _statistics() == []
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stats WHERE tablename = 'chat_message' AND attname = 'seq'")
        assert cursor.fetchone() == (1,)  # other columns keep their statistics


def _index_bytes() -> bytes:
    with connection.cursor() as cursor:
        cursor.execute("CHECKPOINT")
        cursor.execute("SELECT current_setting('data_directory'), pg_relation_filepath(%s)", [SEARCH_INDEX])
        data_directory, relative = cursor.fetchone()
    return (Path(data_directory) / relative).read_bytes()


@pytest.mark.django_db(transaction=True)
def test_purged_words_leave_the_full_text_index(owner, thread):
    make_message(thread, SECRET)
    make_message(thread, f"my {KEPT} is called Bob")
    assert b"zanzibar" in _index_bytes()  # the test can see a word in the index file
    assert search_index_rebuild() is True  # no rebuild recorded yet: rebuilds once
    assert search_index_rebuild() is False  # nothing purged since
    _purge(owner, "918273")
    # VACUUM removed the row versions, yet the word is still a key of the GIN index.
    assert b"zanzibar" in _index_bytes()
    assert search_index_rebuild() is True  # what beat runs every DELLM_SEARCH_SCRUB_INTERVAL
    index = _index_bytes()
    assert b"zanzibar" not in index and b"quokka" not in index and b"918273" not in index
    assert KEPT.encode() in index
    assert search_index_rebuild() is False
