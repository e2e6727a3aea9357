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

import re
from collections.abc import Callable
from typing import Any, NamedTuple

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


def partition_index(*, index: str, owner_id: int, table: str | None = None) -> str:
    """The index on `owner_id`'s partition that `index` (on partitioned `table`) attaches, or `index` itself.

    `table`: the index's table, read from the catalog when not given.
    """
    if table is None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT indrelid::regclass::text FROM pg_index WHERE indexrelid = to_regclass(%s)", [index])
            (table,) = cursor.fetchone()
    partition = partition_of(table=table, owner_id=owner_id)
    if partition == table:
        return index
    with connection.cursor() as cursor:
        cursor.execute(_INDEX_SQL, {"index": index, "partition": partition})
        row = cursor.fetchone()
    if row is None:
        raise LookupError(f"no index of {partition} attached to {index}")
    return str(row[0])


# --- Converting a table into hash partitions by owner (migrations chat 0015 and provenance 0004, `dellm_partition`) ---
#
# Everything is read from the catalog, never from a column list here: a column
# or index that an earlier migration added travels with the table. What the
# partitioned table needs that the plain one did not: every primary key,
# unique constraint and unique index includes `owner_id` (PostgreSQL's rule),
# and a foreign key to a partitioned table references its (owner_id, id).

KEY = "owner_id"
# The per-owner tables partitioned by owner, referenced tables first (migrations chat 0015 and 0017, provenance 0004).
# chat_importjob, chat_importupload, chat_memoryread, chat_agentaccess and the facts tables are not
# (docs/subsystems/schema.md says why).
PARTITIONED_TABLES = ("chat_thread", "chat_message", "chat_turn", "chat_contextedge", "provenance_deletionrequest")
_OWNER_PREDICATE = re.compile(r"WHERE \(owner_id = (\d+)\)| WHERE \(\(owner_id = (\d+)\) AND ")


# The table and, if it is partitioned, its partitions: where its indexes are.
_RELATIONS = (
    "SELECT %(table)s::regclass UNION ALL SELECT inhrelid FROM pg_inherits WHERE inhparent = %(table)s::regclass"
)


class _Definition(NamedTuple):
    columns: list[str]  # stored (not generated) columns: what a copy names
    statistics: dict[str, int]  # column -> statistics target set on it (e.g. 0: ANALYZE never samples text)
    indexes: list[tuple[str, str]]  # (name, CREATE INDEX ...) of indexes not behind a constraint
    index_statistics: list[tuple[str, int, int]]  # (index, column number, target)
    constraints: list[tuple[str, str, str]]  # (name, kind, definition): primary, unique, foreign, exclusion
    referencing: list[tuple[str, str, str]]  # (table, name, definition) of other tables' foreign keys to this one
    sequences: list[tuple[str, str]]  # (column, sequence) of identity and serial columns
    reloptions: list[str]


def _definition(cursor: Any, table: str) -> _Definition:
    cursor.execute(
        "SELECT attname, attgenerated, COALESCE(attstattarget, -1) FROM pg_attribute "
        "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
        [table],
    )
    attributes = cursor.fetchall()
    cursor.execute(
        "SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
        f"WHERE x.indrelid IN ({_RELATIONS}) AND NOT EXISTS ("
        "  SELECT FROM pg_constraint c WHERE c.conindid = x.indexrelid AND c.conrelid = x.indrelid"
        "  AND c.contype IN ('p', 'u', 'x')) "
        "AND NOT EXISTS (SELECT FROM pg_inherits h WHERE h.inhrelid = x.indexrelid) ORDER BY i.relname",
        {"table": table},
    )
    indexes = cursor.fetchall()
    cursor.execute(
        "SELECT i.relname, a.attnum, a.attstattarget FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
        f"JOIN pg_attribute a ON a.attrelid = i.oid WHERE x.indrelid IN ({_RELATIONS}) "
        "AND COALESCE(a.attstattarget, -1) >= 0 "
        "AND NOT EXISTS (SELECT FROM pg_inherits h WHERE h.inhrelid = x.indexrelid) ORDER BY 1, 2",
        {"table": table},
    )
    index_statistics = cursor.fetchall()
    cursor.execute(
        "SELECT conname, contype, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = %s::regclass AND conparentid = 0 AND contype IN ('p', 'u', 'f', 'x') "
        "ORDER BY contype DESC, conname",
        [table],
    )
    constraints = cursor.fetchall()
    cursor.execute(
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE confrelid = %s::regclass AND conrelid <> confrelid AND conparentid = 0 AND contype = 'f' ORDER BY 1, 2",
        [table],
    )
    referencing = cursor.fetchall()
    sequences = []
    for name, _, _ in attributes:
        cursor.execute("SELECT pg_get_serial_sequence(%s, %s)", [table, name])
        sequence = cursor.fetchone()[0]
        if sequence:
            sequences.append((name, sequence))
    cursor.execute("SELECT COALESCE(reloptions, '{}') FROM pg_class WHERE oid = %s::regclass", [table])
    return _Definition(
        columns=[name for name, generated, _ in attributes if not generated],
        statistics={name: target for name, _, target in attributes if target >= 0},
        indexes=indexes,
        index_statistics=index_statistics,
        constraints=constraints,
        referencing=referencing,
        sequences=sequences,
        reloptions=list(cursor.fetchone()[0]),
    )


def _with_owner(definition: str) -> str:
    """A foreign key to a partitioned table: `FOREIGN KEY (x) REFERENCES t(id)` gains owner_id on both sides."""
    if definition.startswith(f"FOREIGN KEY ({KEY}, "):
        return definition
    definition = definition.replace("FOREIGN KEY (", f"FOREIGN KEY ({KEY}, ", 1)
    return re.sub(r"REFERENCES (\S+)\(", rf"REFERENCES \1({KEY}, ", definition, count=1)


def partition_table(
    cursor: Any, *, table: str, partitions: int, batch: int = 10_000, report: Callable[[str], None] = print
) -> bool:
    """Turn plain `table` into one hash-partitioned by owner_id into `partitions` (`<table>_p<remainder>`).

    Idempotent: a table already partitioned is left as it is (returns False).
    In order: read the definition from the catalog; rename the table and its
    sequences aside; create the partitioned table LIKE it (defaults, generated
    columns, identity, storage, checks) and its partitions (with the columns'
    statistics targets and the table's storage options); copy the rows in
    batches of `batch` ids, reporting progress; carry the sequences' positions
    over; drop the old table (other tables' foreign keys to it first); then
    the primary key as (owner_id, id), the other constraints (each unique one
    must name owner_id), every index (an index whose predicate names one
    owner goes on that owner's partition only), the indexes' statistics
    targets, and the other tables' foreign keys, now to (owner_id, id).
    Runs in the caller's transaction.
    """
    if is_partitioned(table):
        return False
    if partitions < 1:
        raise ValueError("partitions must be at least 1")
    _rebuild(cursor, table=table, partitions=partitions, batch=batch, report=report)
    return True


def unpartition_table(cursor: Any, *, table: str, batch: int = 10_000, report: Callable[[str], None] = print) -> bool:
    """The reverse of `partition_table`: one plain table again, its primary key `id` (False: it was plain)."""
    if not is_partitioned(table):
        return False
    _rebuild(cursor, table=table, partitions=0, batch=batch, report=report)
    return True


def _rebuild(cursor: Any, *, table: str, partitions: int, batch: int, report: Callable[[str], None]) -> None:
    """Rebuild `table` from its own definition, hash-partitioned into `partitions` (0: one plain table)."""
    found = _definition(cursor, table)
    if KEY not in found.columns:
        raise ValueError(f"{table} has no {KEY} column to partition by")
    if partitions:
        for name, kind, definition in found.constraints:
            if kind in "ux" and KEY not in definition:
                raise ValueError(f"{table}'s constraint {name} must include {KEY}: {definition}")
        for name, definition in found.indexes:
            if definition.startswith("CREATE UNIQUE") and KEY not in definition:
                raise ValueError(f"{table}'s unique index {name} must include {KEY}: {definition}")
    old = f"{table}__unpartitioned" if partitions else f"{table}__partitioned"
    for other, name, _ in found.referencing:
        cursor.execute(f'ALTER TABLE {other} DROP CONSTRAINT "{name}"')
    cursor.execute(f'ALTER TABLE "{table}" RENAME TO "{old}"')
    for _, sequence in found.sequences:
        cursor.execute(f"ALTER SEQUENCE {sequence} RENAME TO {_unqualified(sequence)}__old")
    cursor.execute(
        f'CREATE TABLE "{table}" (LIKE "{old}" INCLUDING DEFAULTS INCLUDING GENERATED INCLUDING IDENTITY '
        f"INCLUDING STORAGE INCLUDING COMPRESSION INCLUDING CONSTRAINTS INCLUDING COMMENTS)"
        + (f" PARTITION BY HASH ({KEY})" if partitions else "")
    )
    if not partitions and found.reloptions:
        cursor.execute(f'ALTER TABLE "{table}" SET ({", ".join(found.reloptions)})')
    for remainder in range(partitions):
        part = f"{table}_p{remainder}"
        cursor.execute(
            f'CREATE TABLE "{part}" PARTITION OF "{table}" '
            f"FOR VALUES WITH (MODULUS {partitions}, REMAINDER {remainder})"
        )
        if found.reloptions:
            cursor.execute(f'ALTER TABLE "{part}" SET ({", ".join(found.reloptions)})')
    for column, target in found.statistics.items():
        # Recurses to every partition: ANALYZE samples each partition's rows.
        cursor.execute(f'ALTER TABLE "{table}" ALTER COLUMN "{column}" SET STATISTICS {int(target)}')

    cursor.execute(f'SELECT count(*) FROM "{old}"')
    total = cursor.fetchone()[0]
    columns = ", ".join(f'"{column}"' for column in found.columns)
    copied, last = 0, -1
    report(f"{table}: copying {total} rows" + (f" into {partitions} partitions" if partitions else ""))
    while True:
        cursor.execute(
            f'WITH moved AS (INSERT INTO "{table}" ({columns}) OVERRIDING SYSTEM VALUE '
            f'SELECT {columns} FROM "{old}" WHERE id > %(last)s ORDER BY id LIMIT %(batch)s '
            f"RETURNING id) SELECT count(*), max(id) FROM moved",
            {"last": last, "batch": batch},
        )
        count, last_id = cursor.fetchone()
        if not count:
            break
        copied, last = copied + count, last_id
        report(f"{table}: {copied}/{total} rows copied")
    for column, sequence in found.sequences:
        cursor.execute(f"SELECT last_value, is_called FROM {_unqualified(sequence)}__old")
        value, called = cursor.fetchone()
        cursor.execute("SELECT setval(pg_get_serial_sequence(%s, %s), %s, %s)", [table, column, value, called])
    cursor.execute(f'DROP TABLE "{old}"')

    for name, kind, definition in found.constraints:
        if kind == "p":
            definition = f"PRIMARY KEY ({KEY}, id)" if partitions else "PRIMARY KEY (id)"
        cursor.execute(f'ALTER TABLE "{table}" ADD CONSTRAINT "{name}" {definition}')
    for _, definition in found.indexes:
        owner = _OWNER_PREDICATE.search(definition)
        if owner:
            # On a partitioned table an owner's partial index lives on the owner's partition.
            part = partition_of(table=table, owner_id=int(owner.group(1) or owner.group(2)))
            definition = re.sub(r" ON (\S+) USING ", f' ON "{part}" USING ', definition, count=1)
        cursor.execute(definition)
    for index, column_number, target in found.index_statistics:
        for child in [index, *_attached(cursor, index)]:
            cursor.execute(f'ALTER INDEX "{child}" ALTER COLUMN {int(column_number)} SET STATISTICS {int(target)}')
    for other, name, definition in found.referencing:
        definition = _with_owner(definition) if partitions else definition
        cursor.execute(f'ALTER TABLE {other} ADD CONSTRAINT "{name}" {definition}')
    report(f"{table}: " + (f"partitioned into {partitions}" if partitions else "one table again") + f", {copied} rows")


def _unqualified(name: str) -> str:
    return name.split(".")[-1]


def _attached(cursor: Any, index: str) -> list[str]:
    cursor.execute("SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = %s::regclass", [index])
    return [row[0] for row in cursor.fetchall()]


def partition_status(tables: list[str]) -> list[dict[str, Any]]:
    """For each table: partitioned or not, and each partition's name and row estimate."""
    found = []
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(
                "SELECT child.relname, child.reltuples::bigint FROM pg_inherits i "
                "JOIN pg_class child ON child.oid = i.inhrelid WHERE i.inhparent = to_regclass(%s) ORDER BY 1",
                [table],
            )
            parts = cursor.fetchall()
            found.append(
                {
                    "table": table,
                    "partitioned": is_partitioned(table),
                    "partitions": [{"name": name, "rows": max(rows, 0)} for name, rows in parts],
                }
            )
    return found


def _owner_foreign_keys(models: list[Any]) -> list[tuple[str, str, str]]:
    """(table, column, target) of each `db_constraint=False` foreign key from an owner's table to a partitioned one."""
    found = []
    for model in models:
        for field in model._meta.concrete_fields:
            if field.is_relation and not field.db_constraint:
                target = field.related_model._meta.db_table
                if is_partitioned(target):
                    found.append((model._meta.db_table, field.column, target))
    return found


def owner_foreign_keys_add(cursor: Any, *, models: list[Any]) -> None:
    """For each such foreign key: `(owner_id, x_id) REFERENCES target (owner_id, id)`, checked at commit as Django's.

    One that exists already (under any name) is left as it is.
    """
    for table, column, target in _owner_foreign_keys(models):
        cursor.execute(
            "SELECT FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'f' AND conparentid = 0 "
            "AND pg_get_constraintdef(oid) LIKE %s",
            [table, f"FOREIGN KEY ({KEY}, {column}) REFERENCES {target}({KEY}, id)%"],
        )
        if cursor.fetchone() is not None:
            continue
        cursor.execute(
            f'ALTER TABLE "{table}" ADD CONSTRAINT "{_owner_fk_name(table, column)}" '
            f'FOREIGN KEY ({KEY}, "{column}") REFERENCES "{target}" ({KEY}, id) DEFERRABLE INITIALLY DEFERRED'
        )


def owner_foreign_keys_drop(cursor: Any, *, models: list[Any]) -> None:
    for table, column, _ in _owner_foreign_keys(models):
        cursor.execute(f'ALTER TABLE "{table}" DROP CONSTRAINT IF EXISTS "{_owner_fk_name(table, column)}"')


def _owner_fk_name(table: str, column: str) -> str:
    return f"{table}_{column}_owner_fk"[:63]
