"""Bulk-load synthetic histories for benchmarks, in dedicated `bench-<i>` users.

The generator, per user with n messages (seq 1..n):

- messages alternate user (odd seq) / assistant (even seq); a new thread every
  `THREAD_TURNS` turns; timestamps one minute apart, ending now;
- text: short sentences drawn from fixed word lists (a seeded RNG), embedded
  with the offline embedder in batches, or random unit vectors with
  `random_vectors=True` (their `embedding_model` says so, and the report too);
- edges: each reply gets `user message -> reply` (rank 0) and 5 more parents
  among the user's earlier messages: `RECENT_PARENTS` from the last
  `RECENT_SPAN` messages and the rest uniformly from the whole earlier
  history. The recent links chain the history, so Dep(m) of a message k
  positions from the end holds about k messages: |Dep| spans 1..n and every
  bucket up to the user's size is populated. The uniform links give the
  fan-in and long jumps that retrieval by similarity produces. Each edge's
  score is the true cosine similarity of its two vectors.

Loading is one transaction: the two tables' secondary indexes and foreign
keys are dropped, the rows are COPYed per user (binary for messages, text for
edges), then the indexes and constraints are rebuilt (one pass each, which is
what makes a million rows take minutes, not an hour), each message's index
is computed as a turn's (its previous turn is an index look-up, so only once
the indexes exist: before, it scanned the table for each row) and the tables
analyzed.
A failure rolls everything back, indexes included. It holds the tables'
exclusive lock meanwhile: seed a bench database, not a live one.
"""

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.utils import timezone
from pgvector.psycopg.vector import register_vector_info
from psycopg.types import TypeInfo

from chat.models import ContextEdge, Message, Thread
from chat.writer import edges_copy, messages_copy, messages_index_build, owners_history_delete
from provenance.models import DeletionRequest

USERNAME_PREFIX = "bench-"
RANDOM_MODEL = "bench-random-unit"
THREAD_TURNS = 20
PARENTS = 5
RECENT_PARENTS = 3
RECENT_SPAN = 20
# Rows per COPY statement: bounds the memory of one chunk (vectors and text).
CHUNK = 20_000
THREADS, MESSAGES, EDGES = Thread._meta.db_table, Message._meta.db_table, ContextEdge._meta.db_table
TABLES = (MESSAGES, EDGES)

_SUBJECTS = [
    "my sister",
    "my neighbour",
    "our team",
    "my landlord",
    "the dentist",
    "my cat",
    "my manager",
    "our coach",
    "my grandfather",
    "the bakery",
    "my flatmate",
    "the library",
    "my cousin",
    "our band",
    "the garage",
    "my doctor",
]
_VERBS = [
    "moved to",
    "is planning a trip to",
    "recommended",
    "complained about",
    "bought a house near",
    "started a course on",
    "keeps talking about",
    "sold a painting in",
    "organised a party in",
    "wrote a review of",
    "lost a bag in",
    "is learning about",
    "found a job in",
    "called me from",
    "booked a table in",
    "photographed",
]
_OBJECTS = [
    "Lisbon",
    "the harbour",
    "Kyoto",
    "quantum computing",
    "sourdough bread",
    "the old theatre",
    "Marseille",
    "chess",
    "the mountain cabin",
    "jazz piano",
    "Toronto",
    "beekeeping",
    "the city marathon",
    "Norwegian",
    "a vintage bicycle",
    "the river festival",
    "Buenos Aires",
    "watercolours",
    "the night market",
    "Reykjavik",
    "tax forms",
    "orchids",
]
_WHEN = ["last week", "yesterday", "in March", "this summer", "two years ago", "on Sunday", "recently", "at Easter"]
_QUESTIONS = [
    "What did {s} do {w}?",
    "Where did {s} go?",
    "Do you remember what {s} said about {o}?",
    "Remind me what I told you about {o}.",
    "Who {v} {o}?",
]
_REPLIES = [
    "Noted: {s} {v} {o} {w}.",
    "You mentioned that {s} {v} {o}.",
    "From what you told me, {s} {v} {o}.",
    "I remember {o}: {s} {v} it {w}.",
]


@dataclass(frozen=True)
class SeedResult:
    users: int
    messages: int
    edges: int
    threads: int
    seconds: float
    vectors: str


def sentences(n: int, rng: np.random.Generator) -> list[str]:
    s = rng.integers(len(_SUBJECTS), size=n)
    v = rng.integers(len(_VERBS), size=n)
    o = rng.integers(len(_OBJECTS), size=n)
    w = rng.integers(len(_WHEN), size=n)
    q = rng.integers(len(_QUESTIONS), size=n)
    r = rng.integers(len(_REPLIES), size=n)
    ask = rng.random(n) < 0.3
    texts = []
    for i in range(n):
        words = {"s": _SUBJECTS[s[i]], "v": _VERBS[v[i]], "o": _OBJECTS[o[i]], "w": _WHEN[w[i]]}
        if i % 2:
            texts.append(_REPLIES[r[i]].format(**words))
        elif ask[i]:
            texts.append(_QUESTIONS[q[i]].format(**words))
        else:
            text = f"{words['s'].capitalize()} {words['v']} {words['o']} {words['w']}."
            texts.append(text)
    return texts


def random_unit(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    vectors = rng.standard_normal((n, dim), dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def embed_texts(texts: list[str]) -> np.ndarray:
    from chat.index.embeddings import get_embedder

    vectors = get_embedder().embed(texts)
    if any(v is None for v in vectors):
        raise RuntimeError("the offline embedder returned no vector for a generated sentence")
    return np.asarray(vectors, dtype=np.float32)


def parents_for(n: int, rng: random.Random) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Edges (source index, target index, rank) of one user's n messages, 0-based indices."""
    sources, targets, ranks = [], [], []
    for j in range(1, n, 2):
        sources.append(j - 1)
        targets.append(j)
        ranks.append(0)
        earlier = j - 1
        if earlier == 0:
            continue
        chosen: list[int] = []
        low = max(0, earlier - RECENT_SPAN)
        recent = range(low, earlier)
        chosen += rng.sample(recent, min(RECENT_PARENTS, len(recent)))
        want = min(PARENTS, earlier)
        while len(chosen) < want:
            pick = rng.randrange(earlier)
            if pick not in chosen:
                chosen.append(pick)
        for rank, source in enumerate(chosen, start=1):
            sources.append(source)
            targets.append(j)
            ranks.append(rank)
    return np.asarray(sources, dtype=np.int64), np.asarray(targets, dtype=np.int64), np.asarray(ranks, dtype=np.int16)


def bench_user_ids() -> list[int]:
    return list(
        get_user_model()
        .objects.filter(username__startswith=USERNAME_PREFIX)
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def owner_drop(owner_id: int) -> None:
    """Remove one throwaway bench owner and all their rows (raw deletes, as `bench_reset`)."""
    with transaction.atomic():
        owners_history_delete(owner_ids=[owner_id])
        with connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {THREADS} WHERE owner_id = %s", [owner_id])
        get_user_model().objects.filter(pk=owner_id).delete()


def bench_reset() -> int:
    """Remove every bench user and all their rows (raw deletes: millions of rows). Returns users removed."""
    ids = bench_user_ids()
    if not ids:
        return 0
    with transaction.atomic():
        owners_history_delete(owner_ids=ids)
        with connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {DeletionRequest._meta.db_table} WHERE owner_id = ANY(%s)", [ids])
            cursor.execute(f"DELETE FROM {THREADS} WHERE owner_id = ANY(%s)", [ids])
            cursor.execute("DELETE FROM knox_authtoken WHERE user_id = ANY(%s)", [ids])
        get_user_model().objects.filter(pk__in=ids).delete()
    return len(ids)


def _reserve_ids(cursor, table: str, count: int) -> int:
    """Take `count` consecutive ids from the table's sequence; returns the first."""
    cursor.execute(
        "SELECT setval(pg_get_serial_sequence(%s, 'id'), nextval(pg_get_serial_sequence(%s, 'id')) + %s - 1)",
        [table, table, count],
    )
    return cursor.fetchone()[0] - count + 1


# The same statistics target on each partition's index of a rebuilt partitioned index.
_CHILD_TARGETS = """
DO $$
DECLARE child regclass;
BEGIN
    FOR child IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = '{index}'::regclass LOOP
        EXECUTE format('ALTER INDEX %s ALTER COLUMN {number} SET STATISTICS {target}', child);
    END LOOP;
END
$$
"""


def _drop_indexes(cursor) -> tuple[list[str], list[str]]:
    """Drop secondary indexes and FK/unique constraints of TABLES; return the DDL that recreates them."""
    cursor.execute(
        """
        SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid), contype
        FROM pg_constraint WHERE conrelid = ANY(%s::regclass[]) AND contype IN ('f', 'u') AND conparentid = 0
        ORDER BY contype DESC, conname
        """,
        [list(TABLES)],
    )
    constraints = cursor.fetchall()
    cursor.execute(
        """
        SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
        FROM pg_index i
        WHERE i.indrelid = ANY(%s::regclass[]) AND NOT i.indisprimary
          AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)
        ORDER BY 1
        """,
        [list(TABLES)],
    )
    indexes = cursor.fetchall()
    # An index column's statistics target (0 on expression columns that hold
    # text, docs/SECURITY.md) is not part of its definition: restore it too.
    cursor.execute(
        """
        SELECT a.attrelid::regclass::text, a.attnum, a.attstattarget
        FROM pg_attribute a JOIN pg_index i ON i.indexrelid = a.attrelid
        WHERE i.indrelid = ANY(%s::regclass[]) AND NOT i.indisprimary AND a.attstattarget >= 0
          AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)
        """,
        [list(TABLES)],
    )
    stats = cursor.fetchall()
    # On a table partitioned by owner, the parent index's target does not reach its partitions' indexes.
    targets = [f"ALTER INDEX {name} ALTER COLUMN {number} SET STATISTICS {target}" for name, number, target in stats]
    targets += [_CHILD_TARGETS.format(index=name, number=number, target=target) for name, number, target in stats]
    for table, name, _, _ in constraints:
        cursor.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
    for name, _ in indexes:
        cursor.execute(f"DROP INDEX {name}")
    # Unique constraints (their indexes) before the foreign keys that may rely on them.
    recreate_constraints = [
        f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}'
        for table, name, definition, kind in sorted(constraints, key=lambda c: c[3] != "u")
    ]
    # A partitioned table's index reads `ON ONLY` (the parent alone, invalid, no partition's index):
    # recreated as such, the partitions would lose theirs. Without ONLY it builds and attaches them.
    definitions = [definition.replace(" ON ONLY ", " ON ", 1) for _, definition in indexes]
    return definitions + targets, recreate_constraints


def bench_seed(
    *,
    users: int,
    messages: int,
    extra_sizes: list[int] | None = None,
    random_vectors: bool = False,
    reset: bool = False,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> SeedResult:
    """Create `users` bench users sharing `messages` messages, plus one user per size in `extra_sizes`.

    Side effects in order: with `reset`, removes earlier bench users; then,
    in one transaction, creates users and threads, COPYs messages and edges,
    rebuilds the indexes; then VACUUM ANALYZE (visibility map and statistics).
    """
    say = progress or (lambda _text: None)
    started = time.monotonic()
    if reset:
        say(f"removed {bench_reset()} earlier bench users")
    sizes = [messages // users + (1 if i < messages % users else 0) for i in range(users)] + list(extra_sizes or [])
    first = len(bench_user_ids())
    # Random vectors: any dimension (the column has none); the configured one, or WordLlama's.
    dim = settings.DELLM_EMBEDDING_DIM or 256
    model = RANDOM_MODEL if random_vectors else settings.DELLM_EMBEDDING_MODEL
    rng = np.random.default_rng(seed)
    pick = random.Random(seed)
    now = timezone.now()
    totals = {"messages": 0, "edges": 0, "threads": 0}
    loaded: dict[int, list[int]] = {}
    User = get_user_model()
    with transaction.atomic():
        owners = User.objects.bulk_create(
            [User(username=f"{USERNAME_PREFIX}{first + i}", password="!") for i in range(len(sizes))]
        )
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL maintenance_work_mem = '512MB'")
            cursor.execute("SET LOCAL synchronous_commit = off")
            indexes, constraints = _drop_indexes(cursor)
            for number, (owner, n) in enumerate(zip(owners, sizes, strict=True), start=1):
                _load_user(
                    cursor,
                    owner_id=owner.pk,
                    n=n,
                    dim=dim,
                    model=model,
                    rng=rng,
                    pick=pick,
                    now=now,
                    random_vectors=random_vectors,
                    totals=totals,
                    loaded=loaded.setdefault(owner.pk, []),
                )
                if number % 10 == 0 or number == len(sizes):
                    say(f"loaded {number}/{len(sizes)} users, {totals['messages']:,} messages")
            say("rebuilding indexes and constraints")
            for ddl in indexes + constraints:
                cursor.execute(ddl)
            # Each row's previous turn is an index look-up: statistics first, or the planner scans the table for each.
            cursor.execute(f"ANALYZE {MESSAGES}")
            for number, owner in enumerate(owners, start=1):
                messages_index_build(owner_id=owner.pk, ids=loaded[owner.pk])
                if number % 10 == 0 or number == len(owners):
                    say(f"indexed {number}/{len(owners)} users")
    say("vacuum analyze")
    with connection.cursor() as cursor:
        for table in (THREADS, *TABLES):
            cursor.execute(f"VACUUM ANALYZE {table}")
    return SeedResult(
        users=len(sizes),
        messages=totals["messages"],
        edges=totals["edges"],
        threads=totals["threads"],
        seconds=time.monotonic() - started,
        vectors="random unit vectors" if random_vectors else f"offline embedder ({settings.DELLM_EMBEDDING_MODEL})",
    )


def _load_user(cursor, *, owner_id, n, dim, model, rng, pick, now, random_vectors, totals, loaded) -> None:
    if n == 0:
        return
    thread_count = (n + 2 * THREAD_TURNS - 1) // (2 * THREAD_TURNS)
    first_thread = _reserve_ids(cursor, THREADS, thread_count)
    first_message = _reserve_ids(cursor, MESSAGES, n)
    start = now - timedelta(minutes=n)
    # The raw psycopg cursor, with pgvector's binary dumper registered on it alone.
    with connection.connection.cursor() as copy_cursor:
        register_vector_info(copy_cursor, TypeInfo.fetch(connection.connection, "vector"))
        with copy_cursor.copy(
            f"COPY {THREADS} (id, owner_id, title, created_at, updated_at) FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["bigint", "integer", "varchar", "timestamptz", "timestamptz"])
            for t in range(thread_count):
                opened = start + timedelta(minutes=t * 2 * THREAD_TURNS)
                closed = min(now, opened + timedelta(minutes=2 * THREAD_TURNS))
                copy.write_row((first_thread + t, owner_id, f"Bench thread {t + 1}", opened, closed))
        vectors_all = []
        for low in range(0, n, CHUNK):
            high = min(n, low + CHUNK)
            texts = sentences(high - low, rng)
            vectors = random_unit(high - low, dim, rng) if random_vectors else embed_texts(texts)
            vectors_all.append(vectors)
            loaded += messages_copy(
                copy_cursor=copy_cursor,
                rows=(
                    (
                        first_message + i,
                        owner_id,
                        first_thread + i // (2 * THREAD_TURNS),
                        i + 1,
                        "assistant" if i % 2 else "user",
                        texts[i - low],
                        vectors[i - low],
                        model,
                        start + timedelta(minutes=i),
                    )
                    for i in range(low, high)
                ),
            )
        vectors = np.concatenate(vectors_all)
        sources, targets, ranks = parents_for(n, pick)
        for low in range(0, len(sources), CHUNK):
            s, t, r = sources[low : low + CHUNK], targets[low : low + CHUNK], ranks[low : low + CHUNK]
            scores = np.einsum("ij,ij->i", vectors[s], vectors[t])
            scores[r == 0] = 1.0
            edges_copy(
                copy_cursor=copy_cursor,
                owner_id=owner_id,
                rows=(
                    (first_message + a, first_message + b, c, d)
                    for a, b, c, d in zip(s.tolist(), t.tolist(), r.tolist(), scores.tolist(), strict=True)
                ),
            )
    totals["messages"] += n
    totals["edges"] += len(sources)
    totals["threads"] += thread_count
