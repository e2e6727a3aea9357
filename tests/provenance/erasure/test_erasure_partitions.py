"""The eraser's upkeep runs on the purging owner's partitions only, and on whole tables otherwise.

The product schema here is not partitioned (or is, once the partition work
lands); to see the eraser on a partitioned one either way, a schema ahead of
`public` on the search path holds hash-partitioned stand-ins of the text
tables with the registry's index names, so `chat_message`,
`message_search_gin` and the rest resolve to them, as they would after the
migration; the deletion requests and the other tables stay in `public`.
"""

import re
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from chat.index.vectors import index_name, vector_indexes
from chat.partitions import partition_of
from provenance.erasure.eraser import compact, scrub, vacuum
from provenance.erasure.registry import reindexed, text_tables
from provenance.models import DeletionRequest
from tests.factories import make_user

MODULUS = 4
# Stand-ins of the partitioned tables: the columns the indexes need, the registry's index names.
_SCHEMA = (
    "CREATE TABLE chat_message (owner_id int NOT NULL, id bigint NOT NULL, thread_id bigint, source_id text, "
    "search tsvector, PRIMARY KEY (owner_id, id)) PARTITION BY HASH (owner_id)",
    "CREATE TABLE chat_thread (owner_id int NOT NULL, id bigint NOT NULL, source_id text, "
    "PRIMARY KEY (owner_id, id)) PARTITION BY HASH (owner_id)",
    *(
        f"CREATE TABLE {table}_p{r} PARTITION OF {table} FOR VALUES WITH (modulus {MODULUS}, remainder {r})"
        for table in ("chat_message", "chat_thread")
        for r in range(MODULUS)
    ),
    "CREATE INDEX message_search_gin ON chat_message USING gin (search)",
    "CREATE INDEX message_owner_search_gin ON chat_message USING gin (search)",
    "CREATE UNIQUE INDEX message_thread_source_unique ON chat_message (owner_id, thread_id, source_id)",
    "CREATE UNIQUE INDEX thread_owner_source_unique ON chat_thread (owner_id, source_id)",
)


@pytest.fixture
def partitioned(transactional_db):
    with connection.cursor() as cursor:
        cursor.execute("CREATE SCHEMA parted")
        cursor.execute("SET search_path = parted, public")
        for statement in _SCHEMA:
            cursor.execute(statement)
    yield
    with connection.cursor() as cursor:
        cursor.execute("RESET search_path")
        cursor.execute("DROP SCHEMA parted CASCADE")


@pytest.fixture
def owners(partitioned):
    """Two users whose rows live in different partitions: (the one who purges, the other)."""
    first = make_user("purger")
    other = make_user("other0")
    while partition_of(table="chat_message", owner_id=other.pk) == partition_of(
        table="chat_message", owner_id=first.pk
    ):
        other = make_user(f"other{other.pk}")
    return first, other


def _part(owner_id: int) -> str:
    return partition_of(table="chat_message", owner_id=owner_id).removeprefix("chat_message")


def _files(relations: list[str]) -> dict[str, str]:
    """{relation: its file}, each name resolved on the search path: `public` has partitions of the same names."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT r, pg_relation_filepath(to_regclass(r)) FROM unnest(%s::text[]) AS r", [relations])
        return dict(cursor.fetchall())


def _child_indexes() -> dict[str, str]:
    """{index on a partition: its partition} for every child of the registered text indexes."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.inhrelid::regclass::text, x.indrelid::regclass::text FROM pg_inherits i "
            "JOIN pg_index x ON x.indexrelid = i.inhrelid WHERE i.inhparent = ANY(%s::regclass[])",
            [reindexed()],
        )
        return dict(cursor.fetchall())


def _everything() -> list[str]:
    """What a forced scrub rebuilds: every text index whole, every per-owner vector index (another test's too)."""
    return [*reindexed(), *sorted(index_name(i.owner_id, i.model, i.dim) for i in vector_indexes())]


def _statements(queries: CaptureQueriesContext, verb: str) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if re.match(verb, q["sql"])]


def test_vacuum_and_compaction_touch_only_the_owners_partitions(owners):
    owner, other = owners
    mine, theirs = _part(owner.pk), _part(other.pk)
    expected = [f"chat_message{mine}", f"chat_thread{mine}", "chat_importupload", "chat_importjob"]
    with CaptureQueriesContext(connection) as queries:
        assert vacuum(owner_id=owner.pk)[0] == expected
    vacuumed = 'VACUUM (ANALYZE, INDEX_CLEANUP ON) "' + '", "'.join(expected) + '"'
    assert _statements(queries, "VACUUM") == [vacuumed]

    before = _files(["chat_message" + mine, "chat_message" + theirs, "chat_thread" + theirs])
    with CaptureQueriesContext(connection) as queries:
        assert compact(owner_ids=[owner.pk]) == expected
    assert _statements(queries, "VACUUM") == [f'VACUUM FULL "{table}"' for table in expected]
    after = _files(list(before))
    # Rewritten: a new file. The other owner's partitions are untouched.
    assert [name for name in before if after[name] != before[name]] == ["chat_message" + mine]


def test_scrub_rebuilds_the_purging_owners_partition_of_every_text_index(owners):
    owner, _ = owners
    purge = DeletionRequest.objects.create(
        owner=owner, selector="ids", mode="purge", status="executed", executed_at=timezone.now()
    )
    children = _child_indexes()
    mine = sorted(index for index, table in children.items() if table.endswith(_part(owner.pk)))
    assert len(mine) == len(reindexed())  # one child of each registered text index
    before = _files(list(children))
    with CaptureQueriesContext(connection) as queries:
        rebuilt = scrub()
    assert sorted(rebuilt) == mine
    reindex = _statements(queries, "REINDEX")
    assert sorted(re.sub(r'REINDEX INDEX CONCURRENTLY "(.*)"', r"\1", s) for s in reindex) == mine
    after = _files(list(children))
    assert sorted(name for name in children if after[name] != before[name]) == mine
    purge.refresh_from_db()
    assert purge.scrubbed_at is not None
    assert scrub() == []  # nothing purged since

    # Forced: every index whole (the partitioned index rebuilds every partition's).
    assert scrub(force=True) == _everything()
    assert [name for name in children if _files([name])[name] == after[name]] == []


@pytest.mark.django_db(transaction=True)
def test_a_purge_that_commits_while_a_scrub_runs_is_scrubbed_by_the_next(owner):
    assert scrub(force=True) == _everything()
    DeletionRequest.objects.create(owner=owner, selector="ids", mode="soft", status="executed")
    DeletionRequest.objects.create(owner=owner, selector="ids", mode="purge", status="previewed")
    assert scrub() == []  # a soft deletion, a purge not confirmed: nothing to scrub
    # Its transaction stamped executed_at before that scrub started and committed after the scrub read the purges.
    DeletionRequest.objects.create(
        owner=owner, selector="ids", mode="purge", status="executed", executed_at=timezone.now() - timedelta(minutes=1)
    )
    assert scrub() != []
    assert scrub() == []


@pytest.mark.django_db(transaction=True)
def test_compact_command_rewrites_the_owners_part_of_every_text_table(owner):
    out = StringIO()
    call_command("dellm_compact", "--owner", str(owner.pk), stdout=out)
    # The owner's part: the table here; its partition on the migrated schema.
    parts = [partition_of(table=table, owner_id=owner.pk) for table in text_tables()]
    assert out.getvalue().strip() == f"Compacted {', '.join(parts)}."
