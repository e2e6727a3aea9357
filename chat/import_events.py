"""An import job's progress as Server-Sent Events.

The worker saves the job's counts to its row and publishes a bare "changed"
ping (the job id, nothing else) on the job's Redis channel; the stream reads
the row on each ping, or every `poll` seconds if a ping is missed. Nothing of
the file's content goes through Redis.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import redis
from django.conf import settings

from chat.streams import _client, sse
from dellm_site.redis_ns import key

logger = logging.getLogger(__name__)


def channel(job_id: int) -> str:
    # Under this instance's prefix, like every Redis key and channel (dellm_site/redis_ns.py).
    return key(settings.DELLM_REDIS_PREFIX, "import", job_id)


def import_publish(job_id: int) -> None:
    try:
        _client().publish(channel(job_id), json.dumps({"event": "changed", "data": {"id": job_id}}))
    except redis.RedisError:
        logger.warning("import %s: could not publish progress", job_id)


def import_event_stream(
    *, load: Callable[[], tuple[str, dict[str, Any]]], job_id: int, timeout: float, poll: float = 1.0
) -> Iterator[str]:
    """`progress` events with the job's JSON whenever its counts change, then `done` or `failed`."""
    pubsub = _client().pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(channel(job_id))
    try:
        last: dict[str, Any] | None = None
        deadline = time.monotonic() + timeout
        next_ping = time.monotonic() + 15
        while time.monotonic() < deadline:
            status, body = load()
            if status in ("done", "failed"):
                yield sse(status, {"import": body})
                return
            if body != last:
                last = body
                yield sse("progress", {"import": body})
            pubsub.get_message(timeout=poll)
            while pubsub.get_message(timeout=0) is not None:
                pass
            if time.monotonic() >= next_ping:
                next_ping = time.monotonic() + 15
                yield ": ping\n\n"
        yield sse("timeout", {"status": last["status"] if last else None})
    finally:
        pubsub.close()
