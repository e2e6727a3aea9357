"""Importing a chat history at scale: a synthetic ChatGPT export, embeddings included.

Two measurements: a 10,000-message export in typical conversations (the
product's target: <= 60 s on this machine, offline embedder), and the cost of
conservative provenance, whose edges grow linearly with a conversation's
length (`chat.lineage`; one conversation of each length, imported alone).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import numpy as np
from django.contrib.auth import get_user_model

from chat.imports.history import history_import, history_parse
from chat.index.embeddings import get_embedder
from lab.bench.seed import owner_drop, sentences

# Not the seed's prefix: these users live only for the measurement.
USERNAME_PREFIX = "importbench-"
TARGET_SECONDS = 60.0


def chatgpt_export(*, conversations: int, per_conversation: int, seed: int = 0) -> bytes:
    """A ChatGPT conversations.json: a root with a null message, then alternating user/assistant turns."""
    rng = np.random.default_rng(seed)
    return chatgpt_export_of(sentences(conversations * per_conversation, rng), per_conversation=per_conversation)


def chatgpt_export_of(texts: list[str], *, per_conversation: int) -> bytes:
    """`texts` as a ChatGPT export, `per_conversation` at a time, alternating user and assistant turns."""
    document: list[dict[str, Any]] = []
    start = 1_700_000_000.0
    for c in range(len(texts) // per_conversation):
        mapping: dict[str, Any] = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
        parent = "root"
        for m in range(per_conversation):
            node = f"c{c}-m{m}"
            mapping[parent]["children"].append(node)
            mapping[node] = {
                "id": node,
                "message": {
                    "id": node,
                    "author": {"role": "user" if m % 2 == 0 else "assistant", "name": None, "metadata": {}},
                    "create_time": start + c * 3600 + m,
                    "content": {"content_type": "text", "parts": [texts[c * per_conversation + m]]},
                    "status": "finished_successfully",
                    "metadata": {},
                    "recipient": "all",
                },
                "parent": parent,
                "children": [],
            }
            parent = node
        document.append(
            {
                "id": f"conv-{c}",
                "conversation_id": f"conv-{c}",
                "title": f"Conversation {c}",
                "create_time": start + c * 3600,
                "mapping": mapping,
                "current_node": parent,
            }
        )
    return json.dumps(document).encode()


def _user() -> Any:
    return get_user_model().objects.create_user(username=f"{USERNAME_PREFIX}{uuid.uuid4().hex[:8]}")


def _timed_import(data: bytes) -> dict[str, Any]:
    owner = _user()
    try:
        started = time.perf_counter()
        parsed = history_parse(data=data)
        parsed_at = time.perf_counter()
        progress = history_import(owner_id=owner.pk, parsed=parsed)
        done = time.perf_counter()
    finally:
        owner_drop(owner.pk)
    return {
        "messages": progress.messages_imported,
        "edges": progress.edges_created,
        "failed": progress.conversations_failed,
        "parse_s": parsed_at - started,
        "import_s": done - parsed_at,
        "total_s": done - started,
    }


def import_bench(
    *,
    messages: int = 10_000,
    per_conversation: int = 20,
    edge_lengths: tuple[int, ...] = (100, 500, 2000),
    seed: int = 0,
) -> dict[str, Any]:
    loading = time.perf_counter()
    get_embedder()
    load_s = time.perf_counter() - loading
    data = chatgpt_export(conversations=messages // per_conversation, per_conversation=per_conversation, seed=seed)
    main = _timed_import(data) | {"bytes": len(data), "per_conversation": per_conversation}
    edges = [
        _timed_import(chatgpt_export(conversations=1, per_conversation=length, seed=seed)) | {"length": length}
        for length in edge_lengths
    ]
    return {"embedder_load_s": load_s, "main": main, "edge_cost": edges, "target_s": TARGET_SECONDS}
