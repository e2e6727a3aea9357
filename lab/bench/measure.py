"""The in-process measurements of `manage.py dellm_bench`: Dep(m), retrieval, turn overhead, purge.

Each returns plain dicts (milliseconds, counts, ids) for the report. They run
against the bench users that `manage.py dellm_seed` made, through the
product's own selectors and services.
"""

import random
import time
from collections.abc import Callable

import numpy as np
import rustworkx as rx
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test import Client

from chat.index.embeddings import embed_one
from chat.index.vectors import MIN_MESSAGES, owner_vector_index_sync, owner_vector_indexes
from chat.llm import get_responder
from chat.models import ContextEdge, Message, Thread
from chat.retrieval.context import IVFFLAT_PROBES, context_retrieve
from chat.turns.run import turn_run
from chat.turns.start import turn_create
from chat.writer import messages_remove
from chat.writer.vectors import messages_index_embed
from core.auth.tokens import token_create
from core.db.locks import owner_lock
from lab.bench.seed import RANDOM_MODEL, bench_user_ids, embed_texts, random_unit, sentences
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview
from provenance.deletions.receipts import forget_probe
from provenance.dependents import dep_ids
from provenance.erasure.eraser import purge_followups, vacuum
from provenance.models import DeletionRequest

BUCKETS = [("1-10", 1, 10), ("10-1k", 11, 1_000), ("1k-10k", 1_001, 10_000), ("10k+", 10_001, 10**12)]
RETRIEVAL_SIZES = (1_000, 10_000, 100_000)
# The turn bench's owners (of 5,000-20,000 messages), each re-embedded first (turn_bench).
TURN_OWNERS = 5


def stats(values: list[float]) -> dict:
    if not values:
        return {"n": 0, "p50": None, "p95": None}
    array = np.asarray(values, dtype=np.float64)
    return {"n": len(values), "p50": float(np.percentile(array, 50)), "p95": float(np.percentile(array, 95))}


def timed(fn: Callable):
    started = time.perf_counter()
    value = fn()
    return (time.perf_counter() - started) * 1000, value


def bench_users() -> list[tuple[int, int]]:
    """(owner id, live messages) of every bench user, smallest first."""
    ids = bench_user_ids()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT owner_id, count(*) FROM {Message._meta.db_table} WHERE owner_id = ANY(%s) AND status = 'active' "
            "GROUP BY owner_id",
            [ids],
        )
        counts = dict(cursor.fetchall())
    return sorted(((owner, counts.get(owner, 0)) for owner in ids), key=lambda pair: (pair[1], pair[0]))


def nearest_user(users: list[tuple[int, int]], size: int, *, exclude=()) -> tuple[int, int] | None:
    """The bench user whose size is closest to `size` (within a factor of 2), if any."""
    fits = [u for u in users if u[0] not in exclude and size / 2 <= u[1] <= size * 2]
    return min(fits, key=lambda u: (abs(u[1] - size), u[0])) if fits else None


def vectors_model(owner_id: int) -> str:
    """The embedding model of the owner's vectors (the seed gives all of an owner's messages one)."""
    return Message.objects.filter(owner_id=owner_id).values_list("embedding_model", flat=True).first() or ""


def vectors_kind(owner_id: int) -> str:
    model = vectors_model(owner_id)
    return "random unit vectors" if model == RANDOM_MODEL else f"offline embedder ({model})"


class OwnerGraph:
    """One owner's provenance graph loaded into rustworkx (the in-memory alternative)."""

    def __init__(self, owner_id: int):
        self.owner_id = owner_id
        started = time.perf_counter()
        self.ids = list(Message.objects.filter(owner_id=owner_id).order_by("seq").values_list("pk", flat=True))
        self.index = {pk: i for i, pk in enumerate(self.ids)}
        edges = ContextEdge.objects.filter(owner_id=owner_id).values_list("source_id", "target_id")
        self.graph = rx.PyDiGraph(multigraph=False)
        self.graph.add_nodes_from(range(len(self.ids)))
        self.graph.add_edges_from_no_data([(self.index[s], self.index[t]) for s, t in edges])
        self.load_ms = (time.perf_counter() - started) * 1000

    def dep(self, message_id: int) -> set[int]:
        return {self.ids[i] for i in rx.descendants(self.graph, self.index[message_id])} | {message_id}

    def dep_size(self, message_id: int) -> int:
        return len(rx.descendants(self.graph, self.index[message_id])) + 1

    def root_with_dep(self, target: int) -> tuple[int, int]:
        """A message whose |Dep| is closest to `target`, by bisection over positions (|Dep| shrinks with seq)."""
        low, high = 0, len(self.ids) - 1
        while low < high:
            middle = (low + high + 1) // 2
            if self.dep_size(self.ids[middle]) >= target:
                low = middle
            else:
                high = middle - 1
        return self.ids[low], self.dep_size(self.ids[low])


def _bucket(size: int) -> str:
    return next(name for name, low, high in BUCKETS if low <= size <= high)


def dep_bench(*, users, per_bucket: int, http_per_bucket: int, rng: random.Random) -> dict:
    """Dep(m) by |Dep| bucket: recursive CTE vs rustworkx.descendants, and the HTTP dependents endpoint."""
    chosen = [users[-1][0]]
    typical = nearest_user(users, 10_000, exclude=chosen) or nearest_user(users, 1_000, exclude=chosen)
    if typical:
        chosen.append(typical[0])
    graphs = [OwnerGraph(owner) for owner in chosen]
    candidates: dict[str, list[tuple[OwnerGraph, int, int]]] = {name: [] for name, _, _ in BUCKETS}
    for graph in graphs:
        n = len(graph.ids)
        for back in sorted({int(x) for x in np.geomspace(1, n, num=80)}):
            root = graph.ids[n - back]
            size = graph.dep_size(root)
            candidates[_bucket(size)].append((graph, root, size))
    rows, mismatches, samples = [], 0, []
    client = Client()
    for name, _, _ in BUCKETS:
        picked = candidates[name]
        if len(picked) > per_bucket:
            picked = rng.sample(picked, per_bucket)
        cte, memory, ratios, http, sizes = [], [], [], [], []
        for index, (graph, root, size) in enumerate(picked):
            dep_ids(owner_id=graph.owner_id, roots=[root])
            cte_ms, from_db = timed(lambda g=graph, r=root: dep_ids(owner_id=g.owner_id, roots=[r]))
            rx_ms, in_memory = timed(lambda g=graph, r=root: g.dep(r))
            mismatches += from_db != in_memory
            cte.append(cte_ms)
            memory.append(rx_ms)
            ratios.append(cte_ms / max(rx_ms, 1e-3))
            sizes.append(size)
            samples.append({"bucket": name, "size": size, "cte_ms": cte_ms, "rustworkx_ms": rx_ms})
            if index < http_per_bucket:
                token = token_create(user=get_user_model().objects.get(pk=graph.owner_id))[1]
                url = f"/api/messages/{root}/dependents/"
                client.get(url, HTTP_AUTHORIZATION=f"Token {token}")
                http_ms, response = timed(lambda u=url, t=token: client.get(u, HTTP_AUTHORIZATION=f"Token {t}"))
                if response.status_code != 200 or response.json()["count"] != size - 1:
                    mismatches += 1
                http.append(http_ms)
        rows.append(
            {
                "bucket": name,
                "sizes": f"{min(sizes)}-{max(sizes)}" if sizes else "–",
                "cte": stats(cte),
                "rustworkx": stats(memory),
                "ratio_p50": stats(ratios)["p50"],
                "http": stats(http),
            }
        )
    return {
        "rows": rows,
        "samples": samples,
        "mismatches": mismatches,
        "graphs": [{"owner": g.owner_id, "messages": len(g.ids), "load_ms": g.load_ms} for g in graphs],
    }


def _queries(owner_id: int, count: int, rng: np.random.Generator) -> tuple[np.ndarray, list[str]]:
    """Query vectors and the texts the fused retrieval's full-text side reads."""
    texts = sentences(count, rng)
    if vectors_kind(owner_id).startswith("random"):
        return random_unit(count, 256, rng), texts
    return embed_texts(texts), texts


def _recall(got: list[int], ids: np.ndarray, sims: np.ndarray, k: int) -> float:
    """Hits among the top-k; a tie with the k-th best similarity counts as a hit."""
    kth = np.partition(sims, len(sims) - k)[len(sims) - k]
    good = set(ids[sims >= kth - 1e-5].tolist())
    return len(set(got) & good) / k


def _retrieval_run(owner_id: int, queries: np.ndarray, ids: np.ndarray, vectors: np.ndarray, k: int) -> dict:
    times, recalls, brute = [], [], []
    probe = Message(id=0, owner_id=owner_id, embedding_model=vectors_model(owner_id))
    for query in queries:
        probe.embedding = query
        context_retrieve(message=probe, policy="vector", k=k, threshold=-1.0, window=0, neighbours="none")
        ms, items = timed(
            lambda: context_retrieve(message=probe, policy="vector", k=k, threshold=-1.0, window=0, neighbours="none")
        )
        np_ms, sims = timed(lambda q=query: vectors @ q)
        top_ms, _ = timed(lambda s=sims: np.argpartition(s, len(s) - k)[-k:])
        times.append(ms)
        brute.append(np_ms + top_ms)
        recalls.append(_recall([item.id for item in items], ids, sims, k))
    return {
        "db": stats(times),
        "numpy": stats(brute),
        "recall_mean": float(np.mean(recalls)),
        "recall_min": min(recalls),
    }


def _fused_run(owner_id: int, queries: np.ndarray, texts: list[str], k: int) -> dict:
    """The default policy (similarity and full text fused) at the default thresholds: latency only.

    There is no brute-force reference for a fused ranking; its quality is
    measured by `dellm_eval`'s conversational-memory section.
    """
    times = []
    probe = Message(id=0, owner_id=owner_id, embedding_model=vectors_model(owner_id))
    for query, text in zip(queries, texts, strict=True):
        probe.embedding, probe.content = query, text
        ms, _ = timed(lambda: context_retrieve(message=probe, policy="relevant", k=k, threshold=0.2, window=0))
        times.append(ms)
    return {"db": stats(times), "numpy": stats([]), "recall_mean": None, "recall_min": None}


def retrieval_bench(
    *, users, queries: int, k: int = 5, seed: int = 0, sizes=RETRIEVAL_SIZES, index_min: int = MIN_MESSAGES
) -> dict:
    """Per-user top-k through `context_retrieve`, recall@k against a NumPy brute force over the same vectors."""
    rng = np.random.default_rng(seed + 1)
    rows, taken = [], []
    for size in sizes:
        user = nearest_user(users, size, exclude=taken)
        if user is None:
            continue
        owner_id, _ = user
        taken.append(owner_id)
        pairs = Message.objects.filter(owner_id=owner_id, status="active", embedding__isnull=False).values_list(
            "pk", "embedding"
        )
        ids = np.fromiter((pk for pk, _ in pairs), dtype=np.int64)
        vectors = np.asarray([vector for _, vector in pairs], dtype=np.float32)
        batch, texts = _queries(owner_id, queries, rng)
        base = {"size": size, "owner": owner_id, "messages": len(ids)}
        if len(ids) < index_min:
            rows.append(base | {"method": "exact scan", **_retrieval_run(owner_id, batch, ids, vectors, k)})
            rows.append(base | {"method": "fused: exact scan + full text", **_fused_run(owner_id, batch, texts, k)})
            continue
        owner_vector_index_sync(min_messages=10**12, owner_ids=[owner_id])
        exact = _retrieval_run(owner_id, batch[: max(5, queries // 4)], ids, vectors, k)
        rows.append(base | {"method": "exact scan (no index)", **exact})
        build_ms, _ = timed(lambda o=owner_id: owner_vector_index_sync(min_messages=index_min, owner_ids=[o]))
        lists = owner_vector_indexes().get(owner_id)
        method = f"per-owner IVFFlat (lists={lists}, probes={IVFFLAT_PROBES}; built in {build_ms / 1000:.1f} s)"
        rows.append(base | {"method": method, **_retrieval_run(owner_id, batch, ids, vectors, k)})
        fused = f"fused: per-owner IVFFlat + full text (lists={lists})"
        rows.append(base | {"method": fused, **_fused_run(owner_id, batch, texts, k)})
    return {"rows": rows, "k": k}


def turn_bench(*, users, turns: int, rng: np.random.Generator) -> dict:
    """A turn minus the LLM call: `turn_run` with the offline responder, less the responder's own time.

    The turn owners' histories are embedded by the configured model first,
    through the product's own indexing (about 6 s per 10,000 messages), as a
    user's are: a seed's random vectors carry another model's name, which no
    question's vector searches, so the vector side would read the owner's
    rows one by one for nothing.
    """
    owners = [owner for owner, size in users if 5_000 <= size <= 20_000][:TURN_OWNERS] or [users[-1][0]]
    for owner_id in owners:
        ids = Message.objects.filter(owner_id=owner_id).exclude(embedding_model=settings.DELLM_EMBEDDING_MODEL)
        messages_index_embed(owner_id=owner_id, ids=list(ids.values_list("pk", flat=True)), missing_only=False)
    # The per-owner vector indexes the hourly sync would have built for them.
    owner_vector_index_sync(owner_ids=owners)
    texts = sentences(turns * 2, rng)[::2]
    store, total, responder_ms, overhead, embed, retrieve = [], [], [], [], [], []
    responder = get_responder()
    failed = 0
    for i, text in enumerate(texts):
        owner_id = owners[i % len(owners)]
        thread = Thread.objects.filter(owner_id=owner_id).order_by("-id").first()
        store_ms, turn = timed(lambda t=thread, c=text: turn_create(thread=t, content=c, enqueue=False))
        embed_ms, vector = timed(lambda c=text: embed_one(c))
        probe = Message(
            id=turn.user_message_id,
            owner_id=owner_id,
            embedding=vector,
            content=text,
            embedding_model=settings.DELLM_EMBEDDING_MODEL,
        )
        retrieve_ms, context = timed(
            lambda p=probe: context_retrieve(message=p, policy="relevant", k=5, threshold=0.2, window=10)
        )
        llm_ms, _ = timed(lambda c=context, t=text: responder.complete(context=c, user_message=t))
        run_ms, done = timed(lambda t=turn: turn_run(turn_id=t.pk, owner_id=t.owner_id))
        if done is None or done.status != "done":
            failed += 1
        store.append(store_ms)
        total.append(run_ms)
        responder_ms.append(llm_ms)
        overhead.append(run_ms - llm_ms)
        embed.append(embed_ms)
        retrieve.append(retrieve_ms)
    return {
        "owners": len(owners),
        "owner_messages": int(np.median([size for owner, size in users if owner in owners])),
        "store": stats(store),
        "turn_run": stats(total),
        "responder": stats(responder_ms),
        "overhead": stats(overhead),
        "embed": stats(embed),
        "retrieve": stats(retrieve),
        "failed": failed,
        "samples": overhead,
    }


def _purge_core_ms(owner_id: int, root: int) -> tuple[float, int]:
    """Dep(m) plus the purge of `deletion_confirm`, under the owner's lock, then rolled back.

    The same calls as `provenance.deletions.remove.dependents_remove` (Dep, the writer's
    `messages_remove`, then the eraser's `purge_followups`) minus the
    receipt's forget probe, so the 10k-message cascade is measured without
    spending minutes on the probe (timed on its own below) or changing the
    data. The deletion row it records goes with the rollback.
    """
    with transaction.atomic():
        owner_lock(owner_id)
        deletion = DeletionRequest.objects.create(
            owner_id=owner_id, actor_id=owner_id, selector="ids", mode="purge", matched_ids=[root]
        )
        started = time.perf_counter()
        members = dep_ids(owner_id=owner_id, roots=[root])
        removed = messages_remove(owner_id=owner_id, ids=members, deletion_id=deletion.pk, purge=True)
        purge_followups(owner_id=owner_id, message_ids=removed, deletion_id=deletion.pk)
        elapsed = (time.perf_counter() - started) * 1000
        transaction.set_rollback(True)
    return elapsed, len(members)


def _receipt_ms(deletion_id: int, started: float, timeout_s: float = 600.0) -> float:
    """Milliseconds from `started` until the deletion's receipt is written (the verification after confirm)."""
    while DeletionRequest.objects.filter(pk=deletion_id, verified_at__isnull=True).exists():
        if time.perf_counter() - started > timeout_s:
            raise RuntimeError(f"deletion {deletion_id} still unverified after {timeout_s:.0f} s")
        time.sleep(0.01)
    return (time.perf_counter() - started) * 1000


def purge_bench(*, users, targets=(1_000, 10_000), repeats: int = 2, full_limit: int = 1_000) -> dict:
    """Cascade purge by |Dep|: the in-transaction core (rolled back), and the whole `deletion_confirm`.

    The whole confirm (with its receipt, whose forget probe is O(|Dep| x history))
    runs for sizes up to `full_limit`, each on a fresh typical user that it spends.
    """
    User = get_user_model()
    purged = set(
        Message.objects.filter(owner_id__in=[u for u, _ in users], status="purged")
        .values_list("owner_id", flat=True)
        .distinct()
    )
    # Typical users (about 10k messages), not the 100k one kept for retrieval.
    fresh = [owner for owner, size in users if owner not in purged and size <= 20_000][::-1]
    rows = []
    for target in targets:
        # Only replies have parents, so |Dep| <= about half the history.
        owner_id = next((o for o, size in users if o not in purged and size >= 2 * target), None)
        if owner_id is None:
            continue
        graph = OwnerGraph(owner_id)
        root, size = graph.root_with_dep(target)
        core = []
        for _ in range(repeats):
            # The owner's part vacuumed and analyzed, as after a real purge: each sample rolls back some
            # 20,000 row versions the next would wade through, and a fresh seed has no statistics yet.
            vacuum(owner_id=owner_id)
            core.append(_purge_core_ms(owner_id, root)[0])
        row = {"target": target, "size": size, "core": stats(core)}
        row |= {"probe": stats([]), "preview": stats([]), "confirm": stats([])}
        if target <= full_limit:
            members = graph.dep(root)
            row["probe"] = stats(
                [timed(lambda o=owner_id, m=members, r=root: forget_probe(owner_id=o, message_ids=m, roots=[r]))[0]]
            )
            preview, confirm, receipt = [], [], []
            for owner_id in [o for o in fresh if dict(users)[o] >= 2 * target][:repeats]:
                fresh.remove(owner_id)
                owner = User.objects.get(pk=owner_id)
                root, _ = OwnerGraph(owner_id).root_with_dep(target)
                preview_ms, deletion = timed(
                    lambda o=owner, r=root: deletion_preview(owner=o, actor=o, mode="purge", ids=[r])
                )
                started = time.perf_counter()
                confirm_ms, deletion = timed(
                    lambda d=deletion, o=owner: deletion_confirm(
                        deletion_id=d.pk, owner_id=o.pk, confirmed_by=o, verify_later=True
                    )
                )
                receipt.append(_receipt_ms(deletion.pk, started))
                deletion.refresh_from_db()
                if deletion.status != "executed":
                    raise RuntimeError(f"purge {deletion.pk} ended {deletion.status}")
                preview.append(preview_ms)
                confirm.append(confirm_ms)
            row |= {"preview": stats(preview), "confirm": stats(confirm), "receipt": stats(receipt)}
        rows.append(row)
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM ANALYZE {Message._meta.db_table}")
    return {"rows": rows}
