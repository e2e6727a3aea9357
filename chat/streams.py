"""Live turn events between the worker and the SSE endpoint, over Redis pub/sub.

The worker publishes on a per-turn channel: `status` (the turn started
running), `token` and `reset` while a reply is generated, and `changed` once
the turn's row changed for good (done or failed). Pub/sub is fire-and-forget:
nothing is stored in Redis, so a purge leaves no residue there; a subscriber
that joins late gets the final reply from the database. Publishing never
fails a turn.

The endpoint (`chat/events.py`) waits on the channel with `redis.asyncio`:
an open stream costs a Redis subscription and a coroutine, no thread and no
database connection. It reads the database only when the channel says the
turn changed (and every DELLM_SSE_RECHECK seconds, in case a message was lost).
"""

import asyncio
import functools
import json
import logging
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import redis
import redis.asyncio
from django.conf import settings

from dellm_site.redis_ns import key

logger = logging.getLogger(__name__)

# What the stream forwards from the channel as it is.
FORWARDED = ("token", "reset")
FINAL = {"done": "reply", "failed": "failed"}
PING_EVERY = 15.0


@functools.cache
def _client() -> redis.Redis:
    return redis.Redis.from_url(
        settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=2, **settings.DELLM_REDIS_OPTIONS
    )


# One asyncio client (and its connection pool) per event loop: the ASGI server
# has one loop; tests that run async code through async_to_sync get a fresh one each time.
_async_clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, redis.asyncio.Redis]" = (
    weakref.WeakKeyDictionary()
)


def async_client() -> redis.asyncio.Redis:
    loop = asyncio.get_running_loop()
    client = _async_clients.get(loop)
    if client is None:
        # Each open stream holds one connection for its subscription: the
        # pool (100 by default) must be as large as the streams one process serves.
        client = redis.asyncio.Redis.from_url(
            settings.REDIS_URL,
            socket_connect_timeout=2,
            **settings.DELLM_REDIS_OPTIONS,
            max_connections=settings.DELLM_REDIS_MAX_CONNECTIONS,
        )
        _async_clients[loop] = client
    return client


def channel(turn_id: int) -> str:
    return key(settings.DELLM_REDIS_PREFIX, "turn", turn_id)


def turn_publish(turn_id: int, event: str, data: dict[str, Any]) -> None:
    try:
        _client().publish(channel(turn_id), json.dumps({"event": event, "data": data}))
    except redis.RedisError:
        logger.warning("turn %s: could not publish a %s event", turn_id, event)


def sse(event: str, data: dict[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


# --- Per-user cap on open streams ---------------------------------------------
# A sorted set per user: one member per open stream, scored by the time its
# slot lapses. A process that dies without releasing leaks nothing for long:
# lapsed members are dropped on the next acquire, and the key itself expires.


def _slots_key(user_id: int) -> str:
    return key(settings.DELLM_REDIS_PREFIX, "streams", user_id)


async def stream_slot_acquire(user_id: int) -> str | None:
    """Take one of the user's DELLM_MAX_STREAMS_PER_USER slots; None if all are taken."""
    now = time.time()
    ttl = settings.DELLM_SSE_TIMEOUT + 60
    member = uuid.uuid4().hex
    slots = _slots_key(user_id)
    async with async_client().pipeline(transaction=True) as pipe:
        pipe.zremrangebyscore(slots, "-inf", now)
        pipe.zadd(slots, {member: now + ttl})
        pipe.zcard(slots)
        pipe.expire(slots, int(ttl) + 1)
        _, _, count, _ = await pipe.execute()
    if count > settings.DELLM_MAX_STREAMS_PER_USER:
        # Two racing requests may both be refused at the edge, never both admitted.
        await async_client().zrem(slots, member)
        return None
    return member


async def stream_slot_release(user_id: int, member: str) -> None:
    try:
        await async_client().zrem(_slots_key(user_id), member)
    except redis.RedisError:
        logger.warning("user %s: could not release a stream slot (it lapses on its own)", user_id)


def stream_slot_release_sync(user_id: int, member: str) -> None:
    """`stream_slot_release` for a stream served synchronously (WSGI)."""
    try:
        _client().zrem(_slots_key(user_id), member)
    except redis.RedisError:
        logger.warning("user %s: could not release a stream slot (it lapses on its own)", user_id)


async def subscribe(name: str) -> redis.asyncio.client.PubSub:
    """An asyncio subscription to the channel `name` (a turn's, an import's)."""
    pubsub = async_client().pubsub(ignore_subscribe_messages=True)
    await pubsub.subscribe(name)
    return pubsub


async def turn_subscribe(turn_id: int) -> redis.asyncio.client.PubSub:
    return await subscribe(channel(turn_id))


async def turn_event_stream(
    *,
    turn_id: int,
    load: Callable[[], Awaitable[tuple[str, dict[str, Any]]]],
    timeout: float,
    recheck: float,
    on_close: Callable[[], Awaitable[None]],
) -> AsyncIterator[str]:
    """Server-Sent Events for one turn: status changes, tokens, then `reply` or `failed`.

    The turn's channel is subscribed before the first `load()` (the turn's
    status and JSON), so an outcome committed in between is seen: either in
    that read or as a `changed` message. Tokens published before the
    subscription are not replayed, since the final `reply` carries the whole
    text. `load()` runs again only when the channel says so, or every
    `recheck` seconds. `on_close` runs however the stream ends. Everything
    happens on the loop that consumes the stream.
    """
    pubsub = None
    try:
        pubsub = await turn_subscribe(turn_id)
        status, body = await load()
        if status in FINAL:
            yield sse(FINAL[status], {"turn": body})
            return
        yield sse("status", {"status": status})
        started = time.monotonic()
        deadline = started + timeout
        next_ping = started + PING_EVERY
        next_check = started + recheck
        while (now := time.monotonic()) < deadline:
            wait = max(0.0, min(deadline, next_ping, next_check) - now)
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=wait)
            reread = False
            if message is not None:
                payload = json.loads(message["data"])
                event = payload.get("event")
                if event in FORWARDED:
                    if status == "pending":
                        # The worker's `status` message may arrive after its first token.
                        status = "running"
                        yield sse("status", {"status": status})
                    yield sse(event, payload.get("data") or {})
                elif event == "status" and payload.get("data", {}).get("status") not in (None, status):
                    status = payload["data"]["status"]
                    if status in FINAL:
                        reread = True
                    else:
                        yield sse("status", {"status": status})
                elif event == "changed":
                    reread = True
            now = time.monotonic()
            if now >= next_check:
                next_check = now + recheck
                reread = True
            if reread:
                new_status, body = await load()
                if new_status in FINAL:
                    yield sse(FINAL[new_status], {"turn": body})
                    return
                if new_status != status:
                    status = new_status
                    yield sse("status", {"status": status})
            if now >= next_ping:
                next_ping = now + PING_EVERY
                yield ": ping\n\n"
        yield sse("timeout", {"status": status})
    finally:
        try:
            if pubsub is not None:
                await pubsub.aclose()
        finally:
            await on_close()
