"""Purging messages whose words sit in their neighbours' indexes.

A throwaway user holds `neighbours` conversations of three user turns each:
a plain first turn, the turn to forget, and the turn after it, whose index
(search vector and vector, chat/index/context.py) carries the second's first
words. One purge of every second turn (a deletion of ids, at most 10,000 at
once) must leave each third turn's index as if the second had never been
said: the writer recomputes the search vectors and drops the vectors in the
purge's transaction (`indexes_refresh`), and the deletion's follow-up embeds
the new index texts (`messages_index_embed`) before the receipt. Timed: the
whole confirmation, and inside it the writer's recompute and the follow-up
embedding (the configured embedder); the receipt's `indexes` check is reported.
"""

import time
import uuid
from typing import Any

from django.contrib.auth import get_user_model

import chat.writer.statuses
import provenance.deletions.remove
from chat.models import Message, Thread
from chat.writer import Branch, Supplied, transcripts_store
from chat.writer.vectors import messages_index_embed
from lab.bench.seed import owner_drop
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview

USERNAME_PREFIX = "ctxbench-"
NEIGHBOURS = 10_000
# Conversations stored per writer call while building the history.
BATCH = 1_000


class _Timer:
    """Wraps a module's function, adding up the seconds it takes (the bench's own probe, removed after)."""

    def __init__(self, module: Any, name: str) -> None:
        self.module, self.name, self.seconds, self.calls = module, name, 0.0, 0
        self.original = getattr(module, name)

    def __enter__(self) -> "_Timer":
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return self.original(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started
                self.calls += 1

        setattr(self.module, self.name, timed)
        return self

    def __exit__(self, *exc: object) -> None:
        setattr(self.module, self.name, self.original)


def ctxindex_bench(*, neighbours: int = NEIGHBOURS) -> dict[str, Any]:
    owner = get_user_model().objects.create_user(username=f"{USERNAME_PREFIX}{uuid.uuid4().hex[:8]}")
    try:
        started = time.perf_counter()
        secrets: list[int] = []
        created: list[int] = []
        for start in range(0, neighbours, BATCH):
            count = min(BATCH, neighbours - start)
            threads = Thread.objects.bulk_create(Thread(owner=owner, title="") for _ in range(count))
            branches = [
                Branch(
                    thread_id=thread.pk,
                    items=[
                        Supplied(role="user", content=f"We planned the trip number {start + n} together"),
                        Supplied(role="user", content=f"My locker code is sesame{start + n} behind the gym"),
                        Supplied(role="user", content="Yeah, it was amazing!"),
                    ],
                )
                for n, thread in enumerate(threads)
            ]
            rows = transcripts_store(owner_id=owner.pk, branches=branches).created
            created += [row.pk for row in rows]
            secrets += [row.pk for row in rows[1::3]]
        messages_index_embed(owner_id=owner.pk, ids=created)
        build_s = time.perf_counter() - started
        carrying = Message.objects.filter(owner=owner, index_sources__overlap=secrets).count()
        preview = deletion_preview(owner=owner, actor=owner, mode="purge", ids=secrets)
        with (
            _Timer(chat.writer.statuses, "indexes_refresh") as refresh,
            _Timer(provenance.deletions.remove, "messages_index_embed") as embed,
        ):
            started = time.perf_counter()
            deletion = deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)
            confirm_s = time.perf_counter() - started
        left = Message.objects.filter(owner=owner, status__in=Message.LIVE, index_sources__overlap=secrets).count()
        unembedded = Message.objects.filter(
            owner=owner, status__in=Message.LIVE, embedding__isnull=True, content__startswith="Yeah"
        ).count()
    finally:
        owner_drop(owner.pk)
    return {
        "neighbours": neighbours,
        "messages": 3 * neighbours,
        "carrying": carrying,
        "build_s": build_s,
        "confirm_s": confirm_s,
        "refresh_s": refresh.seconds,
        "embed_s": embed.seconds,
        "receipt_indexes": deletion.receipt["checks"]["indexes"]
        | {"stale": len(deletion.receipt["checks"]["indexes"]["stale"])},
        "receipt_passed": deletion.receipt["passed"],
        "left_carrying": left,
        "left_unembedded": unembedded,
    }
