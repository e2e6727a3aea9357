"""An import job's progress as Server-Sent Events.

The worker saves the job's counts to its row and publishes a bare "changed"
ping (the job id, nothing else) on the job's Redis channel. The stream, like
the turn stream (chat/streams.py), waits on that channel with `redis.asyncio`
and reads the row only on a ping, or every DELLM_SSE_RECHECK seconds in case
a ping was lost. Nothing of the file's content goes through Redis.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import redis
from django.conf import settings

from chat.streams import PING_EVERY, _client, sse, subscribe
from dellm_site.redis_ns import key

logger = logging.getLogger(__name__)

FINAL = ("done", "failed")


def channel(job_id: int) -> str:
    # Under this instance's prefix, like every Redis key and channel (dellm_site/redis_ns.py).
    return key(settings.DELLM_REDIS_PREFIX, "import", job_id)


def import_publish(job_id: int) -> None:
    try:
        _client().publish(channel(job_id), json.dumps({"event": "changed", "data": {"id": job_id}}))
    except redis.RedisError:
        logger.warning("import %s: could not publish progress", job_id)


async def import_event_stream(
    *,
    job_id: int,
    load: Callable[[], Awaitable[tuple[str, dict[str, Any]]]],
    timeout: float,
    recheck: float,
    on_close: Callable[[], Awaitable[None]],
) -> AsyncIterator[str]:
    """`progress` events with the job's JSON whenever its counts change, then `done` or `failed`.

    Subscribes before the first `load()`, so a change committed in between is
    announced rather than lost. `on_close` runs however the stream ends.
    """
    pubsub = None
    try:
        pubsub = await subscribe(channel(job_id))
        last: dict[str, Any] | None = None
        started = time.monotonic()
        deadline = started + timeout
        next_ping = started + PING_EVERY
        next_check = started + recheck
        reread = True
        while True:
            if reread:
                status, body = await load()
                if status in FINAL:
                    yield sse(status, {"import": body})
                    return
                if body != last:
                    last = body
                    yield sse("progress", {"import": body})
            now = time.monotonic()
            if now >= deadline:
                break
            wait = max(0.0, min(deadline, next_ping, next_check) - now)
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=wait)
            reread = message is not None
            # Pings queued meanwhile say nothing more than the one just read.
            while message is not None:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=0.0)
            now = time.monotonic()
            if now >= next_check:
                next_check = now + recheck
                reread = True
            if now >= next_ping:
                next_ping = now + PING_EVERY
                yield ": ping\n\n"
        yield sse("timeout", {"status": last["status"] if last else None})
    finally:
        try:
            if pubsub is not None:
                await pubsub.aclose()
        finally:
            await on_close()
