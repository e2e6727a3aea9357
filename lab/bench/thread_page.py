"""The thread page of a long conversation: latency and bytes over HTTP.

Self-contained: a throwaway user imports one 2,000-message ChatGPT
conversation (linear transcript edges, `chat.lineage`), then every reply gets
an edge from each earlier message it has none from yet, as the `full` context
policy writes them (and as imports did before edges were linear): about a
million edges, the shape that cost 58-61 s and 55-59 MB per thread page
before pages and edge caps. Requests go through Django's test client, so the
whole middleware and DRF stack runs (no socket); `make bench` lifts the
`thread` throttle (DELLM_THREAD_RATE) as it does the others.
"""

from __future__ import annotations

import json
import time
from typing import Any

from django.db import connection
from django.test import Client

from chat.imports.history import history_import, history_parse
from chat.models import ContextEdge, Message, Thread
from chat.writer import edges_copy
from lab.bench.imports import _user, chatgpt_export
from lab.bench.measure import stats
from lab.bench.seed import owner_drop


def _densify(*, owner_id: int, thread_id: int) -> int:
    """Edges into every reply from each earlier message of the thread; returns how many were added."""
    ids = list(Message.objects.filter(thread_id=thread_id).order_by("seq").values_list("pk", "role"))
    existing = set(ContextEdge.objects.filter(target__thread_id=thread_id).values_list("source_id", "target_id"))
    rows = [
        # Ranks after the transcript's own (0 and 1), most recent first, as a `full` context orders them.
        (source, target, 2 + rank, 0.0)
        for index, (target, role) in enumerate(ids)
        if role == Message.Role.ASSISTANT
        for rank, (source, _) in enumerate(reversed(ids[:index]))
        if (source, target) not in existing
    ]
    with connection.connection.cursor() as copy_cursor:
        edges_copy(copy_cursor=copy_cursor, owner_id=owner_id, rows=rows)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {ContextEdge._meta.db_table}")
    return len(rows)


def _get(client: Client, url: str) -> tuple[float, Any, Any]:
    started = time.perf_counter()
    response = client.get(url)
    elapsed = (time.perf_counter() - started) * 1000
    assert response.status_code == 200, (url, response.status_code)
    return elapsed, response, json.loads(response.content)


def _edges(messages: list[dict]) -> int:
    return sum(len(m["context"]) + len(m["derived"]) for m in messages)


def _next(response: Any) -> str | None:
    for part in response.get("Link", "").split(", "):
        url, _, rel = part.partition("; ")
        if rel == 'rel="next"':
            return url.strip("<>")
    return None


def thread_page_bench(*, messages: int = 2_000, requests: int = 30, seed: int = 0) -> dict[str, Any]:
    owner = _user()
    try:
        parsed = history_parse(data=chatgpt_export(conversations=1, per_conversation=messages, seed=seed))
        history_import(owner_id=owner.pk, parsed=parsed)
        thread_id = Thread.objects.get(owner=owner).pk
        added = _densify(owner_id=owner.pk, thread_id=thread_id)
        edges = ContextEdge.objects.filter(owner_id=owner.pk).count()
        client = Client()
        client.force_login(owner)
        _get(client, f"/api/threads/{thread_id}/")  # warm-up: connection, caches
        # What any signed-in request costs here (the thread list: one row), to read the others against.
        baseline = [_get(client, "/api/threads/") for _ in range(requests)]
        detail = [_get(client, f"/api/threads/{thread_id}/") for _ in range(requests)]
        _, first, body = detail[-1]
        # Every older page, newest to oldest, by the links the answers give.
        pages, url, seen = [], body["messages_next"], len(body["messages"])
        while url:
            ms, response, page = _get(client, url)
            pages.append((ms, len(response.content), len(page), _edges(page)))
            seen += len(page)
            url = _next(response)
        # The message most replies derived from: its detail lists them all, up to DELLM_MESSAGE_MAX_EDGES.
        hub = Message.objects.filter(thread_id=thread_id).order_by("seq").values_list("pk", flat=True)[0]
        hub_calls = [_get(client, f"/api/messages/{hub}/") for _ in range(requests)]
    finally:
        owner_drop(owner.pk)
    return {
        "messages": messages,
        "edges": edges,
        "edges_added": added,
        "requests": requests,
        "baseline": stats([ms for ms, _, _ in baseline]),
        "detail": stats([ms for ms, _, _ in detail]),
        "detail_bytes": len(first.content),
        "detail_messages": len(body["messages"]),
        "detail_edges": _edges(body["messages"]),
        "pages": len(pages),
        "page": stats([ms for ms, *_ in pages]),
        "page_bytes_max": max((size for _, size, _, _ in pages), default=0),
        "page_edges_max": max((count for *_, count in pages), default=0),
        "walked_messages": seen,
        "hub": stats([ms for ms, _, _ in hub_calls]),
        "hub_bytes": len(hub_calls[-1][1].content),
        "hub_derived": len(hub_calls[-1][2]["derived"]),
    }
