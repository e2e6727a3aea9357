"""Per-owner vector indexes for mid-size histories, on real WordLlama vectors.

Random unit vectors say nothing about an index's recall (they have no
clusters: IVFFlat measured 0.14 on them). Here a throwaway user per size
holds a realistic corpus embedded by the default embedder: TOFU's questions
and answers, their answers' sentences, PF personas' statements and requests,
and the seeder's chat sentences to fill. Queries are held-out texts of the
same pool (never stored). For each size the same queries run through
`context_retrieve` three ways: exact scan, the per-owner IVFFlat index that
`owner_vector_index_sync` builds, and an HNSW index over the same
expression (pgvector's defaults, m = 16, ef_construction = 64; ef_search 40
and 100), each timed for the vector policy (recall@10 against a NumPy
brute force) and for the default fused policy (latency).
"""

import random
import re
import time
import uuid
from datetime import timedelta
from pathlib import Path

import numpy as np
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from pgvector.psycopg.vector import register_vector_info
from psycopg.types import TypeInfo

from chat.index.embeddings import get_embedder
from chat.index.vectors import INDEX_PREFIX, MIN_MESSAGES, embedding_cast, owner_vector_index_sync, owner_vector_indexes
from chat.models import Message, Thread
from chat.partitions import partition_of
from chat.retrieval.context import IVFFLAT_PROBES, context_retrieve
from chat.writer import messages_copy, messages_index_build, owners_history_delete
from core.db.planning import planned_parts
from lab.bench.measure import stats, timed
from lab.bench.seed import sentences
from lab.evaluation.personas import pf_generate

USERNAME_PREFIX = "vecbench-"
SIZES = (2_000, 10_000, 30_000)
TOFU = Path(__file__).resolve().parent.parent / "evaluation" / "data" / "tofu" / "full.jsonl"
HNSW_EF_SEARCH = (40, 100)
HNSW_PREFIX = "vecbench_hnsw_"


def corpus(n: int, *, seed: int = 0) -> list[str]:
    """At least `n` distinct chat-like texts, in a seeded order."""
    import json

    texts: list[str] = []
    for line in TOFU.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        texts += [row["question"], row["answer"]]
        texts += [s for s in re.split(r"(?<=[.!?])\s+", row["answer"]) if len(s) > 20]
    personas = max(1, n // 20)
    for scenario in pf_generate(count=personas, seed=seed).scenarios:
        texts += [s.text for s in scenario.statements] + [q.text for q in scenario.questions]
    unique = list(dict.fromkeys(texts))
    rng = np.random.default_rng(seed)
    if len(unique) < n:
        unique += [t for t in dict.fromkeys(sentences(4 * n, rng)) if t not in set(unique)]
    random.Random(seed).shuffle(unique)
    return unique


def _load(owner_id: int, texts: list[str], vectors: np.ndarray, model: str) -> None:
    n = len(texts)
    now = timezone.now()
    with transaction.atomic(), connection.cursor() as cursor:
        thread = Thread.objects.create(owner_id=owner_id, title="vector index bench")
        cursor.execute(
            "SELECT setval(pg_get_serial_sequence(%s, 'id'), nextval(pg_get_serial_sequence(%s, 'id')) + %s - 1)",
            [Message._meta.db_table, Message._meta.db_table, n],
        )
        first = cursor.fetchone()[0] - n + 1
        with connection.connection.cursor() as copy_cursor:
            register_vector_info(copy_cursor, TypeInfo.fetch(connection.connection, "vector"))
            loaded = messages_copy(
                copy_cursor=copy_cursor,
                rows=(
                    (
                        first + i,
                        owner_id,
                        thread.pk,
                        i + 1,
                        "assistant" if i % 2 else "user",
                        texts[i],
                        vectors[i],
                        model,
                        now - timedelta(minutes=n - i),
                    )
                    for i in range(n)
                ),
            )
        messages_index_build(owner_id=owner_id, ids=loaded)
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM ANALYZE {partition_of(table=Message._meta.db_table, owner_id=owner_id)}")


def _recall(got: list[int], ids: np.ndarray, sims: np.ndarray, k: int) -> float:
    kth = np.partition(sims, len(sims) - k)[len(sims) - k]
    good = set(ids[sims >= kth - 1e-5].tolist())
    return len(set(got) & good) / k


def _index_used(probe: Message, setting: str) -> str:
    """The vector index the fused query's plan scans ("" for the exact scan), as planned for `probe`."""
    with CaptureQueriesContext(connection) as queries:
        context_retrieve(message=probe, policy="relevant", k=5, threshold=0.2, window=0)
    [sent] = [q["sql"] for q in queries.captured_queries if "<=>" in q["sql"]]
    planning, statement = planned_parts(sent)
    with transaction.atomic(), connection.cursor() as cursor:
        for line in (setting, planning):
            if line:
                cursor.execute(line)
        cursor.execute(f"EXPLAIN {statement}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    found = re.search(rf"Index Scan using ((?:{INDEX_PREFIX}|{HNSW_PREFIX})\S+)", plan.split("CTE vrank")[0])
    return found.group(1) if found else ""


def _run(owner_id, model, queries, texts, ids, vectors, k, setting="") -> dict:
    probe = Message(id=0, owner_id=owner_id, embedding_model=model)
    probe.embedding, probe.content = queries[0], texts[0]
    index = _index_used(probe, setting)
    vector_ms, fused_ms, recalls = [], [], []
    for query, text in zip(queries, texts, strict=True):
        probe.embedding, probe.content = query, text
        with transaction.atomic():
            if setting:
                with connection.cursor() as cursor:
                    cursor.execute(setting)
            context_retrieve(message=probe, policy="vector", k=k, threshold=-1.0, window=0, neighbours="none")
            ms, items = timed(
                lambda: context_retrieve(
                    message=probe, policy="vector", k=k, threshold=-1.0, window=0, neighbours="none"
                )
            )
            fms, _ = timed(lambda: context_retrieve(message=probe, policy="relevant", k=5, threshold=0.2, window=0))
        vector_ms.append(ms)
        fused_ms.append(fms)
        recalls.append(_recall([item.id for item in items], ids, vectors @ query, k))
    return {
        "index": index,
        "vector": stats(vector_ms),
        "fused": stats(fused_ms),
        "recall_mean": float(np.mean(recalls)),
        "recall_min": float(min(recalls)),
    }


def _hnsw(owner_id: int, model: str, dim: int) -> tuple[str, float]:
    name = f"{HNSW_PREFIX}{owner_id}"
    table = partition_of(table=Message._meta.db_table, owner_id=owner_id)
    with connection.cursor() as cursor:
        ms, _ = timed(
            lambda: cursor.execute(
                f"CREATE INDEX {name} ON {table} USING hnsw (({embedding_cast(dim)}) vector_cosine_ops) "
                f"WHERE owner_id = {int(owner_id)} AND embedding_model = %s",
                [model],
            )
        )
    return name, ms


def vector_index_bench(*, sizes=SIZES, queries: int = 60, k: int = 10, seed: int = 0) -> dict:
    """Recall@k and latency of exact scan, per-owner IVFFlat and HNSW, per history size, on WordLlama vectors."""
    embedder = get_embedder()
    pool = corpus(max(sizes) + queries, seed=seed)
    held_out, stored = pool[:queries], pool[queries:]
    query_vectors = np.asarray(embedder.embed(held_out), dtype=np.float32)
    started = time.perf_counter()
    all_vectors = embedder.embed(stored[: max(sizes)])
    embed_s = time.perf_counter() - started
    rows = []
    User = get_user_model()
    for size in sizes:
        keep = [i for i in range(size) if all_vectors[i] is not None]
        texts = [stored[i] for i in keep]
        vectors = np.asarray([all_vectors[i] for i in keep], dtype=np.float32)
        owner = User.objects.create_user(username=f"{USERNAME_PREFIX}{uuid.uuid4().hex[:8]}")
        try:
            _load(owner.pk, texts, vectors, embedder.model_name)
            ids = np.asarray(
                Message.objects.filter(owner_id=owner.pk).order_by("seq").values_list("pk", flat=True), dtype=np.int64
            )
            args = (owner.pk, embedder.model_name, query_vectors, held_out, ids, vectors, k)
            indexed = len(texts) >= MIN_MESSAGES
            base = {"size": len(texts), "owner": owner.pk}
            rows.append(base | {"method": "exact scan", "kind": "exact", "product": not indexed, **_run(*args)})
            build_ms, _ = timed(
                lambda o=owner.pk: owner_vector_index_sync(min_messages=1, owner_ids=[o], per_relation=10**6)
            )
            lists = owner_vector_indexes()[owner.pk]
            ivf = f"IVFFlat lists={lists} probes={IVFFLAT_PROBES} (built in {build_ms / 1000:.1f} s)"
            rows.append(base | {"method": ivf, "kind": "ivfflat", "product": indexed, **_run(*args)})
            owner_vector_index_sync(min_messages=10**12, owner_ids=[owner.pk])
            name, hnsw_ms = _hnsw(owner.pk, embedder.model_name, embedder.dim)
            for ef in HNSW_EF_SEARCH:
                method = f"HNSW m=16 ef_search={ef} (built in {hnsw_ms / 1000:.1f} s)"
                setting = f"SET LOCAL hnsw.ef_search = {ef}"
                rows.append(base | {"method": method, "kind": "hnsw", "product": False, **_run(*args, setting=setting)})
            with connection.cursor() as cursor:
                cursor.execute(f"DROP INDEX {name}")
        finally:
            owners_history_delete(owner_ids=[owner.pk])
            owner.delete()
    return {
        "rows": rows,
        "k": k,
        "queries": queries,
        "embed_s": embed_s,
        "model": embedder.model_name,
        "min_messages": MIN_MESSAGES,
    }
