"""The live schema follows Citus's rules for tables distributed by `owner_id` (issue 23, item 3; docs/SCALING.md).

Citus itself is not run here: the rules are read from the catalog of the
schema the migrations built. A table distributed by a column can only
enforce a primary key or unique index that includes that column (each shard
checks its own rows), and a foreign key from it must go to a reference table
(copied to every node) or to a colocated distributed table with the
distribution columns paired (both rows on the same shard). A reference or
coordinator-local table cannot reference a distributed one.
"""

from collections.abc import Iterable

import pytest
from django.apps import apps
from django.db import connection

# The placement docs/SCALING.md describes.
DISTRIBUTED = ("chat_thread", "chat_message", "chat_contextedge", "chat_turn", "provenance_deletionrequest")
REFERENCE = ("auth_user",)
# Small per-owner tables no distributed table references: Citus local tables on the coordinator.
COORDINATOR = ("chat_importjob", "chat_importupload", "chat_memoryread", "chat_agentaccess")

_UNIQUE_SQL = """
SELECT t.relname, i.relname, ARRAY(SELECT a.attname FROM unnest(x.indkey) k JOIN pg_attribute a
       ON a.attrelid = t.oid AND a.attnum = k)::text[]
FROM pg_index x JOIN pg_class t ON t.oid = x.indrelid JOIN pg_class i ON i.oid = x.indexrelid
WHERE x.indisunique AND t.relname = ANY(%s) AND t.relnamespace = 'public'::regnamespace
ORDER BY t.relname, i.relname
"""

_FOREIGN_SQL = """
SELECT c.conname, src.relname, dst.relname,
       ARRAY(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY k(n, o) JOIN pg_attribute a
             ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.o)::text[],
       ARRAY(SELECT a.attname FROM unnest(c.confkey) WITH ORDINALITY k(n, o) JOIN pg_attribute a
             ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.o)::text[]
FROM pg_constraint c JOIN pg_class src ON src.oid = c.conrelid JOIN pg_class dst ON dst.oid = c.confrelid
-- The constraint as declared: not the copies PostgreSQL makes for each partition.
WHERE c.contype = 'f' AND c.conparentid = 0 AND src.relnamespace = 'public'::regnamespace
ORDER BY c.conname
"""


def citus_violations(*, distributed: Iterable[str], reference: Iterable[str], column: str = "owner_id") -> list[str]:
    """Each way the live schema breaks Citus's rules for `distributed` (by `column`) and `reference` tables."""
    distributed, reference = set(distributed), set(reference)
    found = []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_class c WHERE c.relname = ANY(%s) AND c.relnamespace = 'public'::regnamespace "
            "AND NOT EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = %s AND a.attnotnull)",
            [sorted(distributed), column],
        )
        found += [f"{table}: no NOT NULL distribution column {column}" for (table,) in cursor.fetchall()]
        cursor.execute(_UNIQUE_SQL, [sorted(distributed)])
        found += [
            f"unique index {index} on {table} ({', '.join(columns)}) does not include {column}"
            for table, index, columns in cursor.fetchall()
            if column not in columns
        ]
        cursor.execute(_FOREIGN_SQL)
        keys = cursor.fetchall()
    for name, source, target, columns, referenced in keys:
        link = f"foreign key {name}: {source} ({', '.join(columns)}) -> {target} ({', '.join(referenced)})"
        if source in distributed:
            if target in reference:
                continue
            if target not in distributed:
                found.append(f"{link}: {target} is neither distributed nor a reference table")
            elif (column, column) not in zip(columns, referenced, strict=True):
                found.append(f"{link} does not pair {column} with {column}")
        elif target in distributed:
            kind = "reference" if source in reference else "coordinator-local"
            found.append(f"{link}: a {kind} table cannot reference a distributed one")
    return found


@pytest.fixture
def probe(db):
    """Throwaway tables for the checker (the test's transaction drops them): a reference table of users."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE probe_user (id int PRIMARY KEY)")


def test_a_colocated_schema_follows_the_rules(probe):
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE probe_thread (owner_id int NOT NULL REFERENCES probe_user, id bigint NOT NULL, "
            "source text, PRIMARY KEY (owner_id, id), UNIQUE (owner_id, source))"
        )
        cursor.execute(
            "CREATE TABLE probe_message (owner_id int NOT NULL REFERENCES probe_user, id bigint NOT NULL, "
            "thread_id bigint NOT NULL, PRIMARY KEY (owner_id, id), "
            "FOREIGN KEY (owner_id, thread_id) REFERENCES probe_thread (owner_id, id)) PARTITION BY HASH (owner_id)"
        )
        cursor.execute(
            "CREATE TABLE probe_message_p0 PARTITION OF probe_message FOR VALUES WITH (modulus 2, remainder 0)"
        )
        cursor.execute(
            "CREATE TABLE probe_message_p1 PARTITION OF probe_message FOR VALUES WITH (modulus 2, remainder 1)"
        )
        # A local table may reference a reference table.
        cursor.execute("CREATE TABLE probe_job (id bigint PRIMARY KEY, owner_id int REFERENCES probe_user)")
    assert citus_violations(distributed=["probe_thread", "probe_message"], reference=["probe_user"]) == []


def test_each_broken_rule_is_named_with_its_constraint(probe):
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE probe_thread (owner_id int NOT NULL REFERENCES probe_user, id bigint PRIMARY KEY, "
            "source text, CONSTRAINT probe_thread_source UNIQUE (source))"
        )
        cursor.execute("CREATE TABLE probe_folder (id bigint PRIMARY KEY)")
        cursor.execute(
            "CREATE TABLE probe_message (owner_id int NOT NULL, id bigint NOT NULL, thread_id bigint, "
            "folder_id bigint, "
            "PRIMARY KEY (owner_id, id), "
            "CONSTRAINT probe_message_thread FOREIGN KEY (thread_id) REFERENCES probe_thread (id), "
            "CONSTRAINT probe_message_folder FOREIGN KEY (folder_id) REFERENCES probe_folder (id))"
        )
        cursor.execute(
            "CREATE TABLE probe_read (id bigint PRIMARY KEY, owner_id int, message_id bigint, "
            "CONSTRAINT probe_read_message FOREIGN KEY (owner_id, message_id) REFERENCES probe_message (owner_id, id))"
        )
        cursor.execute("CREATE TABLE probe_loose (id bigint PRIMARY KEY, owner_id int)")
    found = citus_violations(
        distributed=["probe_thread", "probe_message", "probe_loose"], reference=["probe_user", "probe_read"]
    )
    assert found == [
        "probe_loose: no NOT NULL distribution column owner_id",
        "unique index probe_loose_pkey on probe_loose (id) does not include owner_id",
        "unique index probe_thread_pkey on probe_thread (id) does not include owner_id",
        "unique index probe_thread_source on probe_thread (source) does not include owner_id",
        "foreign key probe_message_folder: probe_message (folder_id) -> probe_folder (id): probe_folder is neither "
        "distributed nor a reference table",
        "foreign key probe_message_thread: probe_message (thread_id) -> probe_thread (id) does not pair owner_id "
        "with owner_id",
        "foreign key probe_read_message: probe_read (owner_id, message_id) -> probe_message (owner_id, id): a "
        "reference table cannot reference a distributed one",
    ]


def test_every_table_of_ours_has_a_placement(db):
    ours = {
        model._meta.db_table
        for label in ("chat", "provenance", "assistant")
        for model in apps.get_app_config(label).get_models()
    }
    assert sorted(ours - set(DISTRIBUTED) - set(COORDINATOR)) == []  # decide where a new table lives in docs/SCALING.md
    assert sorted((set(DISTRIBUTED) | set(COORDINATOR)) - ours) == []


def test_the_product_schema_follows_citus_rules(db):
    # Passes once the per-owner tables are partitioned by owner_id with owner_id in every key (issue 23, item 1).
    assert citus_violations(distributed=DISTRIBUTED, reference=REFERENCE) == []
