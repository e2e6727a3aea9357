"""Which physical relation holds one owner's rows: the hash partition of a table partitioned by `owner_id`.

Erasure upkeep (VACUUM, REINDEX, vector-index rebuilds) should cost one
owner's data, not the installation's: on a table hash-partitioned by
`owner_id` it runs on the owner's partition and its indexes only. On a table
that is not partitioned, the table (and the index) is the answer, so callers
need not know which schema they run on.

The partition is found from PostgreSQL's own routing function,
`satisfies_hash_partition` (what a partition's constraint evaluates), so an
owner with no rows yet is placed where PostgreSQL would put them.
"""

from django.db import connection

# Each partition's (modulus, remainder) read from its bound, "FOR VALUES WITH (modulus 16, remainder 3)".
_PARTITION_SQL = """
SELECT child.relname
FROM pg_inherits i
JOIN pg_class parent ON parent.oid = i.inhparent
JOIN pg_class child ON child.oid = i.inhrelid
WHERE parent.oid = to_regclass(%(table)s)
  AND satisfies_hash_partition(
        parent.oid,
        (regexp_match(pg_get_expr(child.relpartbound, child.oid), 'modulus (\\d+)'))[1]::int,
        (regexp_match(pg_get_expr(child.relpartbound, child.oid), 'remainder (\\d+)'))[1]::int,
        %(owner_id)s::int
      )
"""

_INDEX_SQL = """
SELECT child_index.relname
FROM pg_inherits i
JOIN pg_class child_index ON child_index.oid = i.inhrelid
JOIN pg_index x ON x.indexrelid = child_index.oid
WHERE i.inhparent = to_regclass(%(index)s) AND x.indrelid = to_regclass(%(partition)s)
"""


def is_partitioned(table: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT EXISTS (SELECT FROM pg_partitioned_table WHERE partrelid = to_regclass(%s))", [table])
        return bool(cursor.fetchone()[0])


def partition_of(*, table: str, owner_id: int) -> str:
    """The relation that holds `owner_id`'s rows of `table`: its hash partition, or `table` itself."""
    if not is_partitioned(table):
        return table
    with connection.cursor() as cursor:
        cursor.execute(_PARTITION_SQL, {"table": table, "owner_id": owner_id})
        row = cursor.fetchone()
    if row is None:
        raise LookupError(f"no partition of {table} for owner {owner_id}")
    return str(row[0])


def partition_index(*, table: str, index: str, owner_id: int) -> str:
    """The index on `owner_id`'s partition that `index` (on partitioned `table`) attaches, or `index` itself."""
    partition = partition_of(table=table, owner_id=owner_id)
    if partition == table:
        return index
    with connection.cursor() as cursor:
        cursor.execute(_INDEX_SQL, {"index": index, "partition": partition})
        row = cursor.fetchone()
    if row is None:
        raise LookupError(f"no index of {partition} attached to {index}")
    return str(row[0])
