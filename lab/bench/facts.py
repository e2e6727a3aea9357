"""Distilled memory at scale: extracting the facts of an imported history, the Facts page, a turn's context.

One throwaway user imports a ChatGPT export whose user turns are statements
about themselves (a home city, work, pets, likes, plans, ...: each turn one
fact, offline extractor), then:

- extraction: the worker's passes (`chat.facts.extract.facts_extract_pass`)
  until every message is read, against the import's own time (the target:
  within twice the import's);
- the Facts page's data: `GET /api/facts/` (its first page, and a subject's)
  and one fact's detail, over Django's test client with the middleware, for a
  user with `facts` facts (the target: 300 ms);
- a turn's context (`context_retrieve`, as a turn calls it) before the facts
  were drawn and with them: what facts add to a turn's retrieval.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import numpy as np
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from chat.facts.extract import facts_extract_pass
from chat.imports.history import history_import, history_parse
from chat.models import Message
from chat.retrieval.context import context_retrieve
from chat.turns.start import message_create
from chat.writer.vectors import message_index_embed
from lab.bench.imports import chatgpt_export_of
from lab.bench.seed import owner_drop

USERNAME_PREFIX = "factsbench-"
PAGE_TARGET_MS = 300.0

_CITIES = ["Lisbon", "Porto", "Braga", "Faro", "Leeds", "Osaka", "Lyon", "Ghent", "Cusco", "Tallinn", "Austin"]
_THINGS = ["hiking", "chess", "sourdough", "jazz", "climbing", "poetry", "gardening", "sailing", "tango", "origami"]
_PETS = ["dog", "cat", "parrot", "rabbit", "tortoise", "hamster"]
_NAMES = ["Biscuit", "Pepper", "Mango", "Ziggy", "Noodle", "Olive", "Captain", "Juniper"]
_JOBS = ["nurse", "teacher", "carpenter", "pharmacist", "architect", "librarian", "electrician", "translator"]
# Statements of many-valued subjects (each its own fact: a running number keeps them apart), and now and
# then one of a single-valued subject (a move, a new job), as a person's history has them.
_MANY = [
    "My {pet} is called {name}, pet number {n}.",
    "I love {thing} on weekends, club {n}.",
    "I'm planning to visit {city} in spring, trip {n}.",
    "My sister {name} lives in {city}, visit {n}.",
    "I usually practise {thing} before work, day {n}.",
]
_SINGLE = ["I live in {city} now.", "I work as a {job} in {city}."]
SINGLE_SHARE = 0.02


def statements(n: int, seed: int) -> list[str]:
    """`n` statements a user makes about themselves: mostly distinct facts of many-valued subjects."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        pool = _SINGLE if rng.random() < SINGLE_SHARE else _MANY
        template = pool[int(rng.integers(len(pool)))]
        out.append(
            template.format(
                city=_CITIES[int(rng.integers(len(_CITIES)))],
                job=_JOBS[int(rng.integers(len(_JOBS)))],
                pet=_PETS[int(rng.integers(len(_PETS)))],
                name=_NAMES[int(rng.integers(len(_NAMES)))],
                thing=_THINGS[int(rng.integers(len(_THINGS)))],
                n=i,
            )
        )
    return out


def _ms(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_ms": ordered[len(ordered) // 2] * 1000,
        "p95_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1000,
    }


def _timed(call: Any, repeats: int) -> dict[str, float]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return _ms(times)


def facts_bench(*, messages: int = 20_000, per_conversation: int = 20, requests: int = 20, seed: int = 0) -> dict:
    """Import `messages` (half of them the user's statements), extract, then time the page and a turn's context."""
    owner = get_user_model().objects.create_user(username=f"{USERNAME_PREFIX}{uuid.uuid4().hex[:8]}")
    try:
        said = iter(statements(messages // 2, seed))
        texts = [next(said) if i % 2 == 0 else "Noted, thanks for telling me." for i in range(messages)]
        data = chatgpt_export_of(texts, per_conversation=per_conversation)
        started = time.perf_counter()
        history_import(owner_id=owner.pk, parsed=history_parse(data=data))
        import_s = time.perf_counter() - started
        thread = owner.threads.first()
        questions = ["Which city do I live in?", "What is my pet called?", "What do I do on weekends?"]
        asked = [
            message_index_embed(message_create(thread=thread, role="user", content=question))
            for question in questions * max(1, requests // len(questions))
        ]
        before = _contexts(asked)
        started = time.perf_counter()
        passes = 0
        while True:
            passes += 1
            if not facts_extract_pass(owner_id=owner.pk).more:
                break
        extract_s = time.perf_counter() - started
        facts = Message.objects.filter(owner_id=owner.pk, role=Message.Role.FACT, status__in=Message.LIVE).count()

        client = Client()
        client.force_login(owner)
        first = Message.objects.filter(owner_id=owner.pk, role=Message.Role.FACT).values_list("pk", flat=True).first()
        page = _timed(lambda: _ok(client.get("/api/facts/")), requests)
        subject = _timed(lambda: _ok(client.get("/api/facts/", {"subject": "home"})), requests)
        detail = _timed(lambda: _ok(client.get(f"/api/facts/{first}/")), requests)
        html = _timed(lambda: _ok(client.get("/facts/")), requests)

        after = _contexts(asked)
    finally:
        owner_drop(owner.pk)
    return {
        "messages": messages,
        "facts": facts,
        "import_s": import_s,
        "extract_s": extract_s,
        "extract_passes": passes,
        "extract_over_import": extract_s / import_s if import_s else None,
        "api_facts_page": page,
        "api_facts_subject": subject,
        "api_fact_detail": detail,
        "facts_page_html": html,
        "context_retrieve_before": _ms(before),
        "context_retrieve": _ms(after),
        "page_target_ms": PAGE_TARGET_MS,
    }


def _contexts(asked: list[Message | None]) -> list[float]:
    """The time of each question's context, as a turn reads it (the question itself left out)."""
    times = []
    for message in asked:
        assert message is not None
        started = time.perf_counter()
        context_retrieve(
            message=message,
            policy="relevant",
            k=settings.DELLM_CONTEXT_K,
            threshold=settings.DELLM_CONTEXT_THRESHOLD,
            window=settings.DELLM_CONTEXT_WINDOW,
        )
        times.append(time.perf_counter() - started)
    return times


def _ok(response: Any) -> None:
    if response.status_code != 200:
        raise RuntimeError(f"{response.status_code} from the facts bench")


def facts_targets(part: dict | None) -> list[tuple[str, str, bool | None]]:
    """The report's target rows: extraction against the import, the Facts page's data."""
    if not part:
        return []
    ratio = part["extract_over_import"]
    page = part["api_facts_page"]["p95_ms"]
    return [
        (
            f"Facts of a {part['messages']:,}-message import (offline): extraction within twice the import's time",
            f"{part['extract_s']:.1f} s vs {part['import_s']:.1f} s ({ratio:.2f}x)",
            ratio is not None and ratio <= 2.0,
        ),
        (
            f"Facts page of a {part['facts']:,}-fact user: GET /api/facts/ p95 <= {part['page_target_ms']:.0f} ms",
            f"{page:.0f} ms",
            page <= part["page_target_ms"],
        ),
    ]


def facts_section(part: dict) -> list[str]:
    rows = [
        ("GET /api/facts/ (first page)", part["api_facts_page"]),
        ("GET /api/facts/?subject=home", part["api_facts_subject"]),
        ("GET /api/facts/{id}/ (with its history)", part["api_fact_detail"]),
        ("GET /facts/ (the page's HTML)", part["facts_page_html"]),
        ("a turn's context_retrieve before the facts were drawn", part["context_retrieve_before"]),
        ("a turn's context_retrieve with the facts", part["context_retrieve"]),
    ]
    lines = ["| what | p50 | p95 |", "|---|---|---|"]
    lines += [f"| {name} | {t['p50_ms']:.1f} ms | {t['p95_ms']:.1f} ms |" for name, t in rows]
    return [
        "## Distilled memory (facts)",
        f"One user imports {part['messages']:,} messages (half of them statements about themselves) in "
        f"{part['import_s']:.1f} s; the offline extractor then reads them in {part['extract_passes']} passes in "
        f"{part['extract_s']:.1f} s and stores {part['facts']:,} facts. Then, with those facts:",
        "\n".join(lines),
    ]
