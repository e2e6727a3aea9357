"""The import's taint pass at scale: DeLLM's export chaining 100k new messages onto a deleted one.

The review's adversarial file: each new message derives from the one before
(an explicit edge), the first from a message the user deleted, so rule 1
stores none of them. The old fixpoint dropped one message per round over all
of them (8k messages: 9.7 s, about 25 minutes extrapolated to 100k, under
the owner's lock); `chat.lineage.sources_landed` is one topological pass.
Measured twice: the pass alone (pure Python), and `chat.writer.graph_store`
whole (the owner's lock, the liveness reads, the pass, nothing to insert).
Embeddings and parsing are left out: they are the import part's.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from django.contrib.auth import get_user_model

from chat.lineage import sources_landed
from chat.models import Message, Thread
from chat.writer import GraphEdge, GraphMessage, Supplied, graph_store, message_store
from lab.bench.seed import owner_drop
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview

USERNAME_PREFIX = "taintbench-"


def _chain(size: int) -> tuple[list[GraphMessage], list[GraphEdge]]:
    messages = [
        GraphMessage(
            key=f"m{index}",
            conversation="chain",
            supplied=Supplied(role="assistant" if index % 2 else "user", content=f"chained message {index}"),
        )
        for index in range(1, size + 1)
    ]
    edges = [GraphEdge(source=f"m{index - 1}", target=f"m{index}", rank=0, score=1.0) for index in range(1, size + 1)]
    return messages, edges


def import_taint_bench(*, messages: int = 100_000) -> dict[str, Any]:
    chain, edges = _chain(messages)
    needs = [(edge.source, edge.target) for edge in edges]
    started = time.perf_counter()
    landed = sources_landed(new={m.key for m in chain}, live=set(), needs=needs)
    pass_s = time.perf_counter() - started

    owner = get_user_model().objects.create_user(username=f"{USERNAME_PREFIX}{uuid.uuid4().hex[:8]}")
    try:
        thread = Thread.objects.create(owner=owner, title="Taint bench")
        root = message_store(owner_id=owner.pk, thread_id=thread.pk, role="user", content="deleted since")
        deletion = deletion_preview(owner=owner, actor=owner, mode="soft", ids=[root.pk])
        deletion_confirm(deletion_id=deletion.pk, owner_id=owner.pk, confirmed_by=owner)
        started = time.perf_counter()
        stored = graph_store(
            owner_id=owner.pk,
            messages=chain,
            existing={"m0": root.pk},
            edges=edges,
            conversations={"chain": ["m0", *(m.key for m in chain)]},
            thread_for=lambda conversation: thread.pk,
        )
        store_s = time.perf_counter() - started
        rows = Message.objects.filter(owner=owner).count()
    finally:
        owner_drop(owner.pk)
    return {
        "messages": messages,
        "landed": len(landed),
        "pass_s": pass_s,
        "graph_store_s": store_s,
        "stored": len(stored.created),
        "skipped": stored.skipped,
        "rows_after": rows,
    }
