"""Per-owner IVFFlat indexes on a dimensionless column: one per owner and embedding model, cast to its dimension."""

import re

import numpy as np
import pytest
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max
from django.test.utils import CaptureQueriesContext

from chat.index.vectors import (
    INDEX_PREFIX,
    MIN_MESSAGES,
    embedding_cast,
    index_name,
    owner_vector_index_sync,
    owner_vector_indexes,
    vector_indexes,
    vector_literal,
)
from chat.models import Message
from chat.partitions import is_partitioned, partition_of
from chat.retrieval.context import _RELEVANT_SQL, IVFFLAT_PROBES, context_retrieve
from chat.selectors import LIVE_STATUSES
from core.db.planning import planned_parts
from tests.factories import make_message, make_thread, make_user, unit_vector

# A model name that would break out of a pasted literal: the DDL quotes it.
ODD_MODEL = "o'neil-embed-768d"


def _plan(*, owner_id: int, model: str, dim: int) -> str:
    sql = _RELEVANT_SQL.replace("__EMBEDDING__", embedding_cast(dim))
    params = {
        "query": vector_literal(unit_vector(0, dim)),
        "owner": owner_id,
        "live": LIVE_STATUSES,
        "model": model,
        "exclude": 0,
        "k": 5,
        "candidates": 40,
        "threshold": -1,
        "system": "system",
        "tool": "tool",
    }
    with transaction.atomic(), connection.cursor() as cursor:
        # A tiny table: make the planner prefer any plan that needs no sort,
        # so it shows whether the index matches the query's expression.
        cursor.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off")
        cursor.execute(f"EXPLAIN {sql}", params)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_mid_switch_each_model_gets_its_own_index_and_queries_use_it(owner, thread):
    for seed in range(4):
        make_message(thread, embedding=unit_vector(seed, 256), embedding_model="old-256d")
    for seed in range(3):
        make_message(thread, embedding=unit_vector(seed, 768), embedding_model=ODD_MODEL)
    with connection.cursor() as cursor:
        # CREATE INDEX refuses a table with pending (deferred foreign key) triggers.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")

    assert owner_vector_index_sync(min_messages=3) == {"created": [owner.pk, owner.pk], "rebuilt": [], "dropped": []}
    found = sorted((index.model, index.dim, index.lists) for index in vector_indexes())
    assert found == [("o'neil-embed-768d", 768, 2), ("old-256d", 256, 2)]
    for model, dim in (("old-256d", 256), (ODD_MODEL, 768)):
        assert f"Index Scan using {index_name(owner.pk, model, dim)}" in _plan(owner_id=owner.pk, model=model, dim=dim)

    # The switch is over: the old model's vectors are gone, and so is its index.
    Message.objects.filter(embedding_model="old-256d").update(embedding=unit_vector(9, 768), embedding_model=ODD_MODEL)
    assert owner_vector_index_sync(min_messages=3) == {"created": [], "rebuilt": [], "dropped": [owner.pk]}
    assert [(index.model, index.dim) for index in vector_indexes()] == [(ODD_MODEL, 768)]


# --- Mid-size owners: an index from MIN_MESSAGES on, used by the fused retrieval ---------------

CLUSTERS = 50


def _clustered(count: int, *, seed: int) -> np.ndarray:
    """Unit vectors around CLUSTERS well-separated directions, like a history's topics (random ones have none)."""
    rng = np.random.default_rng(seed)
    centres = np.asarray([unit_vector(c) for c in range(CLUSTERS)])
    points = centres[np.arange(count) % CLUSTERS] + 0.03 * rng.standard_normal((count, 256))
    return points / np.linalg.norm(points, axis=1, keepdims=True)


def _history(thread, vectors: np.ndarray) -> None:
    first = (Message.objects.filter(owner_id=thread.owner_id).aggregate(m=Max("seq"))["m"] or 0) + 1
    Message.objects.bulk_create(
        Message(
            owner_id=thread.owner_id,
            thread=thread,
            seq=first + i,
            role="assistant" if i % 2 else "user",
            content=f"note {first + i} about topic {i % CLUSTERS}",
            embedding=vector.tolist(),
            embedding_model=settings.DELLM_EMBEDDING_MODEL,
        )
        for i, vector in enumerate(vectors)
    )
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(f"ANALYZE {Message._meta.db_table}")


def _question(owner, topic: int) -> Message:
    vector = np.asarray(unit_vector(topic)) + 0.01 * np.random.default_rng(99).standard_normal(256)
    return Message(
        id=0,
        owner_id=owner.pk,
        content=f"what about topic {topic}?",
        embedding=(vector / np.linalg.norm(vector)).tolist(),
        embedding_model=settings.DELLM_EMBEDDING_MODEL,
    )


def _retrieve_plan(question: Message, policy: str) -> tuple[list[int], str]:
    """The ids `context_retrieve` returns, and the plan PostgreSQL chose for its retrieval query."""
    with CaptureQueriesContext(connection) as queries:
        items = context_retrieve(message=question, policy=policy, k=5, threshold=0.2, window=0)
    # Sent with its settings, in one query string (core.db.planning).
    [sent] = [q["sql"] for q in queries.captured_queries if "<=>" in q["sql"]]
    setting, statement = planned_parts(sent)
    assert setting == f"SET LOCAL ivfflat.probes = {IVFFLAT_PROBES}; SET LOCAL enable_sort = off"
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(setting)
        cursor.execute(f"EXPLAIN {statement}")
        return [item.id for item in items], "\n".join(row[0] for row in cursor.fetchall())


def test_a_mid_size_owner_gets_an_index_and_retrieval_uses_it_with_the_exact_top_results(owner, thread):
    _history(thread, _clustered(MIN_MESSAGES, seed=1))
    question = _question(owner, topic=7)
    exact = {policy: _retrieve_plan(question, policy) for policy in ("relevant", "vector")}
    name = index_name(owner.pk, settings.DELLM_EMBEDDING_MODEL, 256)
    assert all(name not in plan for _, plan in exact.values())

    # The default threshold, as the hourly sync runs it.
    assert owner_vector_index_sync() == {"created": [owner.pk], "rebuilt": [], "dropped": []}
    for policy, (ids, _) in exact.items():
        indexed, plan = _retrieve_plan(question, policy)
        assert f"Index Scan using {name}" in plan
        assert indexed == ids
        assert len(ids) == 5


def test_retrieval_settings_do_not_outlive_the_query_in_an_enclosing_transaction(owner, thread):
    make_message(thread, embedding=unit_vector(1))

    def shown() -> list[str]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('enable_sort'), current_setting('ivfflat.probes', true)")
            return list(cursor.fetchone())

    before = shown()
    with transaction.atomic():
        for policy in ("relevant", "vector", "window"):
            context_retrieve(message=_question(owner, topic=1), policy=policy, k=5, threshold=0.2, window=3)
            assert shown() == before
    assert before[0] == "on"


def test_sync_rebuilds_a_grown_index_and_drops_one_below_half_the_threshold(owner, thread):
    _history(thread, _clustered(20, seed=2))
    assert owner_vector_index_sync(min_messages=20) == {"created": [owner.pk], "rebuilt": [], "dropped": []}
    assert owner_vector_indexes() == {owner.pk: 4}
    # Grown, but not four times past lists^2 (16 < 60 <= 64): the centroids still fit.
    _history(thread, _clustered(40, seed=3))
    assert owner_vector_index_sync(min_messages=20) == {"created": [], "rebuilt": [], "dropped": []}
    _history(thread, _clustered(20, seed=4))
    assert owner_vector_index_sync(min_messages=20) == {"created": [], "rebuilt": [owner.pk], "dropped": []}
    assert owner_vector_indexes() == {owner.pk: 9}
    # Below the threshold but not below half of it: kept (no churn at the boundary).
    assert owner_vector_index_sync(min_messages=100) == {"created": [], "rebuilt": [], "dropped": []}
    assert owner_vector_index_sync(min_messages=162) == {"created": [], "rebuilt": [], "dropped": [owner.pk]}
    assert owner_vector_indexes() == {}


def _same_partition(count: int) -> list:
    """`count` new users whose messages share one partition of chat_message (the cap is per relation)."""
    by_partition: dict[str, list] = {}
    number = 0
    while not any(len(users) == count for users in by_partition.values()):
        number += 1
        user = make_user(f"sharer{number}")
        by_partition.setdefault(partition_of(table="chat_message", owner_id=user.pk), []).append(user)
    return next(users for users in by_partition.values() if len(users) == count)


def test_a_relation_holds_at_most_per_relation_indexes_the_largest_histories(db):
    owner, other_owner, third = _same_partition(3)
    thread = make_thread(owner, "t")
    threads = {user.pk: make_thread(user, "t") for user in (other_owner, third)}
    _history(thread, _clustered(30, seed=8))
    _history(threads[other_owner.pk], _clustered(40, seed=9))
    _history(threads[third.pk], _clustered(50, seed=10))
    # Every partial index costs every query on the table planning time (docs/RETRIEVAL.md).
    sync = {"min_messages": 20, "per_relation": 2}
    assert owner_vector_index_sync(**sync) == {"created": [other_owner.pk, third.pk], "rebuilt": [], "dropped": []}
    # A sync limited to one owner does not overrun the cap either.
    assert owner_vector_index_sync(owner_ids=[owner.pk], **sync) == {"created": [], "rebuilt": [], "dropped": []}

    _history(thread, _clustered(30, seed=11))
    assert owner_vector_index_sync(**sync) == {"created": [owner.pk], "rebuilt": [], "dropped": [other_owner.pk]}
    assert sorted(owner_vector_indexes()) == sorted([owner.pk, third.pk])


def test_an_owner_never_uses_another_owners_index(owner, thread, other_owner):
    third = make_user("carol")
    _history(thread, _clustered(60, seed=5))
    _history(make_thread(other_owner, "other"), _clustered(60, seed=6))
    make_message(make_thread(third, "small"), embedding=unit_vector(7))
    assert owner_vector_index_sync(min_messages=50) == {
        "created": [owner.pk, other_owner.pk],
        "rebuilt": [],
        "dropped": [],
    }
    for user in (owner, other_owner, third):
        plan = _plan(owner_id=user.pk, model=settings.DELLM_EMBEDDING_MODEL, dim=256)
        used = {found for found in re.findall(rf"{INDEX_PREFIX}\w+", plan)}
        mine = {index_name(user.pk, settings.DELLM_EMBEDDING_MODEL, 256)} if user != third else set()
        assert used == mine
        ids, _ = _retrieve_plan(_question(user, topic=7), "relevant")
        assert set(Message.objects.filter(pk__in=ids).values_list("owner_id", flat=True)) <= {user.pk}


@pytest.fixture
def partitioned_messages(db):
    """chat_message as migration chat 0015 makes it: hash-partitioned by owner_id (DELLM_PARTITIONS)."""
    assert is_partitioned("chat_message")
    with connection.cursor() as cursor:
        # Deferred foreign-key checks pending in the test's transaction would forbid the CREATE INDEX.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    return "chat_message"


def test_on_a_partitioned_table_the_index_is_built_on_the_owners_partition(partitioned_messages, owner, thread):
    partition = partition_of(table=partitioned_messages, owner_id=owner.pk)
    assert partition != partitioned_messages
    for seed in range(4):
        make_message(thread, embedding=unit_vector(seed))

    assert owner_vector_index_sync(min_messages=4) == {"created": [owner.pk], "rebuilt": [], "dropped": []}
    name = index_name(owner.pk, settings.DELLM_EMBEDDING_MODEL, 256)
    with connection.cursor() as cursor:
        cursor.execute("SELECT indrelid::regclass::text FROM pg_index WHERE indexrelid = %s::regclass", [name])
        assert cursor.fetchone()[0] == partition
    assert [(index.owner_id, index.lists) for index in vector_indexes()] == [(owner.pk, 2)]
    plan = _plan(owner_id=owner.pk, model=settings.DELLM_EMBEDDING_MODEL, dim=256)
    assert f"Index Scan using {name} on {partition}" in plan, plan

    assert owner_vector_index_sync(min_messages=100) == {"created": [], "rebuilt": [], "dropped": [owner.pk]}
    assert vector_indexes() == []


def test_on_a_partitioned_table_the_cap_is_per_partition(partitioned_messages):
    by_partition: dict[str, list] = {}
    number = 0
    while len(by_partition) < 2 or max(len(users) for users in by_partition.values()) < 2:
        number += 1
        user = make_user(f"user{number}")
        by_partition.setdefault(partition_of(table=partitioned_messages, owner_id=user.pk), []).append(user)
    shared = next(users for users in by_partition.values() if len(users) >= 2)
    alone = next(users for users in by_partition.values() if users is not shared)
    small, big, other = shared[0], shared[1], alone[0]
    for user, count in ((small, 4), (big, 6), (other, 4)):
        for seed in range(count):
            make_message(make_thread(user, "t"), embedding=unit_vector(seed))

    # One index per partition: the larger history of the shared one, and the other partition's own.
    done = owner_vector_index_sync(min_messages=4, per_relation=1)
    assert done == {"created": sorted([big.pk, other.pk]), "rebuilt": [], "dropped": []}
