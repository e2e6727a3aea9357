"""Erasure upkeep per partition: the whole table against the purging owner's partition.

Self-contained: two messages-like tables in the bench database, the same
rows in both (owner, id, a short text and its tsvector, a GIN index on it,
primary key (owner_id, id), no statistics on the text, as the product's), one plain and one hash-partitioned by
`owner_id` (partitions named `<table>_p<remainder>`, as the product's). The
rows come from `generate_series` in one INSERT: about ten words of a small
everyday vocabulary per message plus two rarer tokens (a number, a
five-letter code), so the GIN index has many keys, as real text gives it.

Then the messages of one owner of the largest partition (the bound's worst
case) are purged (content and tsvector emptied, as `provenance.deletions.remove`
does) in both tables, and each step of the eraser's
upkeep is timed on the whole table and on that owner's partition (found by
`chat.partitions`, as the eraser finds it): `VACUUM (ANALYZE)` (what every
purge enqueues), `REINDEX INDEX CONCURRENTLY` of the GIN index (the scrub)
and `VACUUM FULL` (the compaction). The tables are dropped at the end.
"""

from __future__ import annotations

import os
import time

from django.db import connection

from chat.partitions import partition_index, partition_of

FLAT = "bench_erase_flat"
HASHED = "bench_erase_hashed"
GIN = "_search_gin"

# Everyday words (a chat about plans, code and food), picked uniformly: the common part of a message.
_VOCABULARY = (
    "the a to and of in is it you that for on with my can this be have are do not what how about we i "
    "your was at me but so if just like from they will there one all would an get or as when some time "
    "make know think need want go see help more good work day new use way try out up now then here "
    "file code test error server data table query user message thread meeting plan week trip flight "
    "hotel dinner recipe garlic onion pasta sauce oven minutes bike train ticket budget invoice "
    "email draft letter report slide chart number list idea question answer reason problem fix bug "
    "python django postgres index vacuum cache redis worker queue deploy branch commit review merge "
    "book chapter story music song movie weather rain sun morning evening tomorrow yesterday friday"
)
_WORDS = _VOCABULARY.split()
_PRIMES = (7919, 104729, 1299709, 15485863, 32452843, 49979687, 67867967, 86028121, 104395301, 122949823)


def _seed_sql(table: str, messages: int, users: int) -> str:
    # Ten picks per message, each from its own mix of the row number (bigint: no overflow at 5M rows).
    picks = " || ' ' || ".join(
        f"w[1 + ((g * {prime}) # (g >> {shift})) % {len(_WORDS)}]"
        for prime, shift in zip(_PRIMES, range(1, len(_PRIMES) + 1), strict=True)
    )
    vocabulary = "ARRAY[" + ", ".join(f"'{word}'" for word in _WORDS) + "]"
    return (
        f"INSERT INTO {table} (owner_id, id, content, search) "
        "SELECT owner_id, g, content, to_tsvector('english', content) FROM ("
        f"  SELECT 1 + g % {users} AS owner_id, g, {picks} || ' ' || (g * 2654435761 % 1000003)::text "
        "    || ' ' || substr(md5(g::text), 1, 5) AS content"
        f"  FROM generate_series(1::bigint, {messages}) g, (SELECT {vocabulary} AS w) words"
        ") rows"
    )


def _timed(sql: str, params: list | None = None) -> float:
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
    return time.perf_counter() - started


def _size(relation: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_total_relation_size(%s::regclass)", [relation])
        return int(cursor.fetchone()[0])


def _drop() -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {FLAT}, {HASHED}")


def _create(partitions: int) -> None:
    columns = "(owner_id int NOT NULL, id bigint NOT NULL, content text NOT NULL, search tsvector NOT NULL, "
    columns += "PRIMARY KEY (owner_id, id))"
    with connection.cursor() as cursor:
        # Autovacuum off: only the timed VACUUMs touch these tables.
        cursor.execute(f"CREATE TABLE {FLAT} {columns} WITH (autovacuum_enabled = off)")
        cursor.execute(f"CREATE TABLE {HASHED} {columns} PARTITION BY HASH (owner_id)")
        for remainder in range(partitions):
            cursor.execute(
                f"CREATE TABLE {HASHED}_p{remainder} PARTITION OF {HASHED} "
                f"FOR VALUES WITH (modulus {partitions}, remainder {remainder}) WITH (autovacuum_enabled = off)"
            )
        for table in (FLAT, HASHED):
            # As chat_message's (migrations chat 0002, 0013): ANALYZE samples no text, so pg_statistic holds none.
            # Sampled, the two columns' statistics were a fixed cost of each VACUUM (ANALYZE), whatever its size.
            cursor.execute(
                f"ALTER TABLE {table} ALTER COLUMN content SET STATISTICS 0, ALTER COLUMN search SET STATISTICS 0"
            )


def _steps(*, table: str, index: str) -> dict[str, float]:
    """The eraser's three upkeep steps on `table` (a whole table or one partition) and `index` (on it)."""
    return {
        "vacuum_s": _timed(f"VACUUM (ANALYZE) {table}"),
        "reindex_s": _timed(f"REINDEX INDEX CONCURRENTLY {index}"),
        "vacuum_full_s": _timed(f"VACUUM FULL {table}"),
    }


def erasure_partition_bench(*, messages: int, users: int, partitions: int) -> dict:
    load_before = os.getloadavg()
    _drop()
    _create(partitions)
    seed_s = _timed(_seed_sql(FLAT, messages, users))
    copy_s = _timed(f"INSERT INTO {HASHED} SELECT * FROM {FLAT}")
    index_s = {}
    for table in (FLAT, HASHED):
        index_s[table] = _timed(f"CREATE INDEX {table}{GIN} ON {table} USING gin (search)")
        _timed(f"VACUUM (ANALYZE) {table}")  # hint bits and the visibility map, before anything is timed
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT tableoid::regclass::text, count(*) FROM {HASHED} GROUP BY 1")
        rows = dict(cursor.fetchall())
        # The worst case for the bound: an owner (all are the same size) of the largest partition.
        cursor.execute(f"SELECT owner_id FROM {max(rows, key=rows.__getitem__)} LIMIT 1")
        owner_id = int(cursor.fetchone()[0])
    purged_s = {
        table: _timed(f"UPDATE {table} SET content = '', search = ''::tsvector WHERE owner_id = {owner_id}")
        for table in (FLAT, HASHED)
    }
    partition = partition_of(table=HASHED, owner_id=owner_id)
    partition_gin = partition_index(table=HASHED, index=f"{HASHED}{GIN}", owner_id=owner_id)
    sizes = {
        "table_mb": _size(FLAT) / 2**20,
        "gin_mb": _size(f"{FLAT}{GIN}") / 2**20,
        "partition_mb": _size(partition) / 2**20,
        "partition_gin_mb": _size(partition_gin) / 2**20,
    }
    whole = _steps(table=FLAT, index=f"{FLAT}{GIN}")
    one = _steps(table=partition, index=partition_gin)
    _drop()
    return {
        "messages": messages,
        "users": users,
        "partitions": partitions,
        "owner_messages": messages // users,
        "partition": partition,
        "partition_rows": rows[partition],
        "partition_rows_min": min(rows.values()),
        "seed_s": seed_s,
        "copy_s": copy_s,
        "index_s": index_s,
        "purge_s": purged_s,
        **sizes,
        "whole": whole,
        "partition_steps": one,
        "load_before": list(load_before),
        "load_after": list(os.getloadavg()),
    }
