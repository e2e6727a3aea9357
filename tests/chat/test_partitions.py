"""chat.partitions: the owner's hash partition (and its index) as PostgreSQL itself routes rows, or the table."""

import pytest
from django.db import connection

from chat.partitions import is_partitioned, partition_index, partition_of


@pytest.fixture
def hashed_table(db):
    """A throwaway table hash-partitioned by owner_id into 4, with an index on the parent."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE part_probe (owner_id int NOT NULL, body text) PARTITION BY HASH (owner_id)")
        for remainder in range(4):
            cursor.execute(
                f"CREATE TABLE part_probe_p{remainder} PARTITION OF part_probe "
                f"FOR VALUES WITH (modulus 4, remainder {remainder})"
            )
        cursor.execute("CREATE INDEX part_probe_body ON part_probe (body)")
    return "part_probe"


def test_partition_of_is_where_postgresql_routes_the_owners_rows(hashed_table):
    owners = list(range(1, 41))
    with connection.cursor() as cursor:
        cursor.executemany("INSERT INTO part_probe VALUES (%s, 'x')", [(owner,) for owner in owners])
        cursor.execute("SELECT owner_id, tableoid::regclass::text FROM part_probe")
        routed = dict(cursor.fetchall())
    assert is_partitioned(hashed_table)
    assert {owner: partition_of(table=hashed_table, owner_id=owner) for owner in owners} == routed
    assert len(set(routed.values())) == 4


def test_partition_of_places_an_owner_without_rows(hashed_table):
    partition = partition_of(table=hashed_table, owner_id=7)
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO part_probe VALUES (7, 'x') RETURNING tableoid::regclass::text")
        assert cursor.fetchone()[0] == partition


def test_partition_index_is_the_owners_partitions_child_of_the_index(hashed_table):
    partition = partition_of(table=hashed_table, owner_id=3)
    child = partition_index(table=hashed_table, index="part_probe_body", owner_id=3)
    with connection.cursor() as cursor:
        cursor.execute("SELECT indrelid::regclass::text FROM pg_index WHERE indexrelid = %s::regclass", [child])
        assert cursor.fetchone()[0] == partition
    assert child != "part_probe_body"


def test_a_table_that_is_not_partitioned_is_its_own_answer(db):
    assert not is_partitioned("chat_importjob")
    assert partition_of(table="chat_importjob", owner_id=1) == "chat_importjob"
    assert partition_index(table="chat_importjob", index="import_owner_recent", owner_id=1) == "import_owner_recent"


def test_the_per_owner_tables_are_hash_partitioned_by_owner(db, owner, settings):
    tables = ("chat_thread", "chat_message", "chat_contextedge", "chat_turn", "provenance_deletionrequest")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT p.partrelid::regclass::text, p.partstrat, a.attname FROM pg_partitioned_table p "
            "JOIN pg_attribute a ON a.attrelid = p.partrelid AND a.attnum = p.partattrs[0] ORDER BY 1"
        )
        assert cursor.fetchall() == [(table, "h", "owner_id") for table in sorted(tables)]
    for table in tables:
        assert partition_of(table=table, owner_id=owner.pk).startswith(f"{table}_p")
    child = partition_index(table="chat_message", index="message_search_gin", owner_id=owner.pk)
    assert child.startswith(partition_of(table="chat_message", owner_id=owner.pk))
