"""Per-owner IVFFlat indexes on a dimensionless column: one per owner and embedding model, cast to its dimension."""

from django.db import connection, transaction

from chat.models import Message
from chat.selectors import _RELEVANT_SQL, LIVE_STATUSES, vector_literal
from chat.vector_indexes import embedding_cast, index_name, owner_vector_index_sync, vector_indexes
from tests.factories import make_message, unit_vector

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
