"""The eraser's registry names every place text lives, and a purge leaves none of it."""

import fnmatch
import secrets

import psycopg
import pytest
from django.apps import apps
from django.db import IntegrityError, connection

from chat.index.vectors import INDEX_PREFIX, index_name, owner_vector_index_sync, vector_indexes
from chat.partitions import partition_index, partition_of
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview
from provenance.erasure.columns import NO_TEXT_COLUMNS, NO_TEXT_TABLES, TEXT_COLUMNS
from provenance.erasure.eraser import scrub, snapshot_horizon, unerased_owners
from provenance.erasure.indexes import INDEXES
from provenance.erasure.places import Way
from provenance.erasure.registry import TABLES, reindexed
from provenance.erasure.tasks import erasure_vacuum_sweep_task
from tests.factories import make_message, unit_vector
from tests.helpers import heap_tuples, indexes_of, relation_files, wait_for

SECRET = "zanzibar quokkas hide my locker code 918273"
WORDS = (b"zanzibar", b"quokka", b"918273")
KEPT = "walrus"


@pytest.fixture
def vector_index_cleanup(transactional_db):
    """Per-owner vector indexes outlive a transactional test's flush: drop the ones a test built."""
    yield
    with connection.cursor() as cursor:
        for index in vector_indexes():
            cursor.execute(f"DROP INDEX IF EXISTS {index_name(index.owner_id, index.model, index.dim)}")


def _purge(owner, phrase: str):
    preview = deletion_preview(owner=owner, actor=owner, exact=phrase, mode="purge")
    return deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)


def _catalog(query: str) -> set[tuple[str, str]]:
    with connection.cursor() as cursor:
        cursor.execute(query, [list(TABLES)])
        return set(cursor.fetchall())


def test_registry_names_every_column(db):
    found = _catalog(
        "SELECT c.relname, a.attname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
        "WHERE c.relname = ANY(%s) AND a.attnum > 0 AND NOT a.attisdropped"
    )
    registered = {tuple(place.name.split(".")) for place in TEXT_COLUMNS} | {
        (table, column) for table, columns in NO_TEXT_COLUMNS.items() for column in columns
    }
    assert sorted(found - registered) == []  # a column nobody decided about: add it to the registry
    assert sorted(registered - found) == []


# Column types that can hold text or a derivative of it (arrays of them too).
TEXT_TYPES = ["text", "varchar", "bpchar", "json", "jsonb", "bytea", "tsvector", "vector", "halfvec", "sparsevec"]


def _tables_with_text_types() -> set[str]:
    """Every table of the database with a column of a TEXT_TYPES type (schema-qualified outside `public`)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT CASE n.nspname WHEN 'public' THEN c.relname ELSE n.nspname || '.' || c.relname END "
            "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
            "JOIN pg_type t ON t.oid = a.atttypid LEFT JOIN pg_type e ON e.oid = t.typelem AND t.typcategory = 'A' "
            # A partition is decided by its table (chat_message_p3 holds what chat_message does).
            "WHERE c.relkind IN ('r', 'p', 'm') AND NOT c.relispartition AND a.attnum > 0 AND NOT a.attisdropped "
            "AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%%' "
            "AND COALESCE(e.typname, t.typname) = ANY(%s)",
            [TEXT_TYPES],
        )
        return {name for (name,) in cursor.fetchall()}


def _undecided_tables() -> list[str]:
    """Tables that could hold text but are neither in the registry's TABLES nor NO_TEXT_TABLES (with a reason)."""
    return sorted(_tables_with_text_types() - set(TABLES) - set(NO_TEXT_TABLES))


def test_registry_decides_about_every_table_that_could_hold_text(db):
    assert _undecided_tables() == []  # a table nobody decided about: add it to TABLES, or NO_TEXT_TABLES with why
    assert sorted(set(NO_TEXT_TABLES) - _tables_with_text_types()) == []  # no stale entry
    assert [table for table, why in NO_TEXT_TABLES.items() if not why] == []
    # A table of our apps decides column by column: it is in TABLES, never exempt whole.
    ours = {
        model._meta.db_table
        for label in ("chat", "provenance", "assistant")
        for model in apps.get_app_config(label).get_models()
    }
    assert sorted(ours & set(NO_TEXT_TABLES)) == []


def test_registry_check_finds_a_planted_table(db):
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE chat_planted (id bigint PRIMARY KEY, note text)")
        cursor.execute("CREATE TABLE chat_planted_ids (id bigint PRIMARY KEY, ids bigint[])")
        cursor.execute("CREATE SCHEMA planted")
        cursor.execute("CREATE TABLE planted.keys (id bigint, labels varchar(20)[])")
    # Only what can hold text counts; the test's transaction drops them.
    assert _undecided_tables() == ["chat_planted", "planted.keys"]


def _indexes_now() -> set[str]:
    """The indexes of the registry's tables and, on a table partitioned by owner, the partitions' own."""
    return indexes_of(list(TABLES))


def _registered(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, place.name) for place in INDEXES)


@pytest.mark.django_db(transaction=True)
def test_registry_names_every_index(owner, thread, vector_index_cleanup):
    for seed in range(3):
        make_message(thread, embedding=unit_vector(seed))
    owner_vector_index_sync(min_messages=3)  # the per-owner kind exists too
    found = _indexes_now()
    assert any(name.startswith(INDEX_PREFIX) for name in found)
    assert sorted(name for name in found if not _registered(name)) == []  # register the new index
    assert sorted(place.name for place in INDEXES if "*" not in place.name and place.name not in found) == []


def _expression_indexes() -> dict[str, int]:
    """{name: statistics target of its expression} of every expression index on the text tables.

    On a table partitioned by owner: an index on the table stands for its partitions' copies (its target is
    0 only if every copy's is), and a partition's own index (a per-owner one) is listed by its name.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(parent.relname, i.relname), CASE WHEN bool_and(a.attstattarget = 0) THEN 0 ELSE -1 END "
            "FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
            "JOIN pg_class t ON t.oid = x.indrelid JOIN pg_attribute a ON a.attrelid = i.oid AND a.attnum = 1 "
            "LEFT JOIN pg_inherits ti ON ti.inhrelid = t.oid "
            "LEFT JOIN pg_inherits ii ON ii.inhrelid = i.oid LEFT JOIN pg_class parent ON parent.oid = ii.inhparent "
            "WHERE (t.relname = ANY(%(tables)s) "
            "OR ti.inhparent IN (SELECT oid FROM pg_class WHERE relname = ANY(%(tables)s))) "
            "AND x.indexprs IS NOT NULL GROUP BY 1",
            {"tables": list(TABLES)},
        )
        return dict(cursor.fetchall())


def _with_partitions(relations: list[str]) -> list[str]:
    """The relations and, for a partitioned table or index, its partitions' (where ANALYZE writes statistics)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = ANY(%s)",
            [relations],
        )
        return relations + [name for (name,) in cursor.fetchall()]


def _column_targets() -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname || '.' || a.attname, a.attstattarget FROM pg_attribute a "
            "JOIN pg_class c ON c.oid = a.attrelid WHERE c.relname = ANY(%s) AND a.attnum > 0",
            [list(TABLES)],
        )
        return dict(cursor.fetchall())


def _stats_rows(relations: list[str]) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tablename, attname, most_common_vals::text, histogram_bounds::text, most_common_elems::text "
            "FROM pg_stats WHERE tablename = ANY(%s)",
            [relations],
        )
        return cursor.fetchall()


def _any_word(rows: list[tuple]) -> bool:
    return any(word.decode() in str(row) for row in rows for word in WORDS)


@pytest.mark.django_db(transaction=True)
def test_no_text_column_or_expression_gets_planner_statistics(owner, thread, vector_index_cleanup):
    from chat.models import ImportJob, ImportUpload, Thread

    for n in range(8):
        make_message(thread, f"{SECRET} {n}", embedding=unit_vector(n), source_id=f"key {SECRET} {n}")
        make_message(thread, f"{KEPT} {n}")
        imported = Thread.objects.create(owner=owner, title=f"{SECRET} {n}", source="jsonl", source_id=f"{SECRET} {n}")
        job = ImportJob.objects.create(owner=owner, format="jsonl", filename=f"{SECRET}.jsonl", threads=[imported.pk])
        ImportUpload.objects.create(job=job, data=SECRET.encode())
    owner_vector_index_sync(min_messages=3)
    targets = _column_targets()
    assert {p.name: targets[p.name] for p in TEXT_COLUMNS} == {p.name: 0 for p in TEXT_COLUMNS}
    expressions = _expression_indexes()
    assert "message_owner_search_gin" in expressions and any(n.startswith(INDEX_PREFIX) for n in expressions)
    # Every expression index holds text, is registered as such, and is never sampled.
    text_indexes = [p.name for p in INDEXES if p.way in (Way.REINDEX, Way.OWNER_REINDEX)]
    assert [n for n in expressions if not any(fnmatch.fnmatchcase(n, p) for p in text_indexes)] == []
    assert expressions == dict.fromkeys(expressions, 0)
    relations = _with_partitions(list(TABLES) + list(expressions))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    rows = _stats_rows(relations)
    assert not _any_word(rows)
    # The other columns have statistics: the test can see that ANALYZE ran.
    assert ("chat_message", "seq") in {(table, column) for table, column, *_ in rows}
    assert [row[:2] for row in rows if row[0] in expressions] == []
    _purge(owner, "918273")  # its own VACUUM (ANALYZE) runs here
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    assert not _any_word(_stats_rows(relations))


def _vector_index_names() -> list[str]:
    return sorted(index_name(i.owner_id, i.model, i.dim) for i in vector_indexes())


def _owners_part(owner_id: int) -> list[str]:
    """The registered text indexes where `owner_id`'s keys are: on a partitioned table, its partition's child."""
    return [partition_index(index=name, owner_id=owner_id) for name in reindexed()]


def _residue(relations: list[str], *, free_space: bool = False) -> dict[str, list[bytes]]:
    """{relation: purged words in it}: an index's whole file; a table's (and its TOAST's) tuples, live or dead.

    `free_space`: a table's whole file too, the bytes between its tuples included.
    """
    found = {}
    for name, data in relation_files(relations).items():
        table = name.removesuffix(":toast") in TABLES
        text = heap_tuples(data) if table and not free_space else data
        if words := [word for word in WORDS if word in text]:
            found[name] = words
    return found


@pytest.mark.django_db(transaction=True)
def test_purged_word_leaves_every_index_and_heap_file(owner, thread, vector_index_cleanup):
    make_message(thread, SECRET, embedding=unit_vector(1))
    # Incompressible and long: stored out of line, in the TOAST table.
    noise = " ".join(secrets.token_hex(8) for _ in range(600))
    make_message(thread, f"{noise} {SECRET} {noise}", embedding=unit_vector(2))
    make_message(thread, f"my {KEPT} is called Bob", embedding=unit_vector(3))
    for seed in range(4, 8):
        make_message(thread, f"{KEPT} number {seed}", embedding=unit_vector(seed))
    owner_vector_index_sync(min_messages=3)
    relations = sorted(_indexes_now()) + list(TABLES)
    before = _residue(relations)
    # The test can see the words in the heap, in TOAST (the long message) and in both full-text indexes.
    assert set(before) >= {"chat_message", "chat_message:toast", "message_search_gin", "message_owner_search_gin"}

    assert scrub() == []  # nothing purged yet
    _purge(owner, "918273")  # the row write, then its VACUUM (eager here)
    # VACUUM removed the row versions, yet the words are still keys of the GIN indexes.
    assert sorted(_residue(relations)) == ["message_owner_search_gin", "message_search_gin"]
    # What beat runs every scrub interval: the purging owner's part of each text index, and its vector index.
    assert scrub() == [*_owners_part(owner.pk), *_vector_index_names()]
    assert _residue(sorted(_indexes_now()) + list(TABLES)) == {}
    assert KEPT.encode() in relation_files(["message_search_gin"])["message_search_gin"]
    assert scrub() == []
    # What VACUUM leaves is free space inside pages, until later rows overwrite
    # it; VACUUM FULL (docs/SECURITY.md, "compact at once") rewrites the tables.
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM FULL {', '.join(TABLES)}")
    assert _residue(sorted(_indexes_now()) + list(TABLES), free_space=True) == {}


@pytest.mark.django_db(transaction=True)
def test_scrub_rebuilds_the_vector_index_of_an_owner_who_purged(owner, thread, other_owner, vector_index_cleanup):
    from tests.factories import make_thread

    other_thread = make_thread(other_owner)
    for seed in range(6):
        make_message(thread, f"{SECRET} {seed}" if seed == 0 else f"{KEPT} {seed}", embedding=unit_vector(seed))
        make_message(other_thread, f"{KEPT} {seed}", embedding=unit_vector(seed + 10))
    owner_vector_index_sync(min_messages=3)
    [mine] = [i for i in vector_indexes() if i.owner_id == owner.pk]
    [theirs] = [i for i in vector_indexes() if i.owner_id == other_owner.pk]

    def files() -> dict[int, str]:
        found = {}
        with connection.cursor() as cursor:
            for index in (mine, theirs):
                cursor.execute("SELECT pg_relation_filepath(%s)", [index_name(index.owner_id, index.model, index.dim)])
                found[index.owner_id] = cursor.fetchone()[0]
        return found

    scrub()
    before = files()
    _purge(owner, "918273")
    rebuilt = scrub()
    assert rebuilt == [
        *_owners_part(owner.pk),
        index_name(mine.owner_id, mine.model, mine.dim),
    ]  # the other owner purged nothing: kept
    after = files()
    assert after[owner.pk] != before[owner.pk]  # a new file: centroids from the live vectors only
    assert after[other_owner.pk] == before[other_owner.pk]
    assert scrub(force=True) == [*reindexed(), *_vector_index_names()]


@pytest.mark.django_db(transaction=True)
def test_scrub_drops_the_copy_an_interrupted_rebuild_left(owner, thread):
    make_message(thread, SECRET)
    make_message(thread, SECRET)
    # What a REINDEX CONCURRENTLY cut short leaves: an invalid index named <index>_ccnew.
    # On a table partitioned by owner, REINDEX CONCURRENTLY rebuilds each partition's copy: the leftover is there.
    partition = partition_of(table="chat_message", owner_id=owner.pk)
    with connection.cursor() as cursor, pytest.raises(IntegrityError):
        cursor.execute(f"CREATE UNIQUE INDEX CONCURRENTLY message_search_gin_ccnew ON {partition} (content)")
    assert "message_search_gin_ccnew" in _indexes_now()
    assert scrub(force=True)[0] == "message_search_gin"
    assert "message_search_gin_ccnew" not in _indexes_now()


@pytest.mark.django_db(transaction=True)
def test_a_purge_under_an_older_open_snapshot_is_erased_once_it_closes(owner, thread):
    make_message(thread, SECRET, embedding=unit_vector(1))
    make_message(thread, f"my {KEPT} is called Bob", embedding=unit_vector(2))
    # Another connection holds a snapshot taken before the purge, as a pg_dump or a long report would.
    reader = psycopg.connect(**connection.get_connection_params())
    reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    assert reader.execute("SELECT count(*) FROM chat_message").fetchone() == (2,)
    try:
        deletion = _purge(owner, "918273")  # its vacuum runs at commit (eager here), under the old snapshot
        deletion.refresh_from_db()
        assert (deletion.purge_xid is not None, deletion.erased_at) == (True, None)
        # The vacuum had to keep the row versions the snapshot can see: the heap file still holds the words.
        assert "chat_message" in _residue(["chat_message"])
        # The sweep waits while the snapshot is open: vacuuming again now would find the same.
        assert unerased_owners(horizon=snapshot_horizon()) == []
        assert unerased_owners() == [owner.pk]
    finally:
        reader.rollback()
        reader.close()
    assert unerased_owners(horizon=snapshot_horizon()) == [owner.pk]
    erasure_vacuum_sweep_task()  # what beat runs every DELLM_SWEEP_INTERVAL
    deletion.refresh_from_db()
    assert deletion.erased_at is not None and deletion.erased_at > deletion.executed_at
    assert _residue(["chat_message"]) == {}
    assert unerased_owners() == []


def _no_other_snapshot() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND backend_xmin IS NOT NULL AND pid NOT IN (SELECT pid FROM pg_stat_progress_vacuum)"
        )
        return cursor.fetchone()[0] == 0


@pytest.mark.django_db(transaction=True)
def test_a_purge_with_no_older_snapshot_is_erased_by_its_own_vacuum(owner, thread):
    make_message(thread, SECRET, embedding=unit_vector(1))
    # No older snapshot: none open now (an autovacuum's ANALYZE of another table may hold one a moment).
    wait_for(_no_other_snapshot)
    deletion = _purge(owner, "918273")
    deletion.refresh_from_db()
    assert deletion.erased_at is not None
    assert _residue(["chat_message"]) == {}
