"""Redis clients and pub/sub: publish an event, subscribe with a confirmation (the stream kit)."""

import asyncio
import functools
import json
import weakref
from collections.abc import Mapping
from typing import Any

import redis
import redis.asyncio
from django.conf import settings

# Redis answers a SUBSCRIBE at once; one that does not is as good as down.
SUBSCRIBE_WITHIN = 5.0


# --- Clients and publishing -----------------------------------------------------


@functools.cache
def redis_client() -> redis.Redis:
    """The process's blocking client: publishing, and waiting under WSGI."""
    return redis.Redis.from_url(
        settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=2, **settings.DELLM_REDIS_OPTIONS
    )


# One asyncio client (and its connection pool) per event loop: the ASGI server
# has one loop; async code run through async_to_sync (WSGI, tests) gets a fresh one each time.
_async_clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, redis.asyncio.Redis]" = (
    weakref.WeakKeyDictionary()
)


def async_redis_client() -> redis.asyncio.Redis:
    loop = asyncio.get_running_loop()
    client = _async_clients.get(loop)
    if client is None:
        # Each open stream holds one connection for its subscription: the
        # pool must be as large as the streams one process serves.
        client = redis.asyncio.Redis.from_url(
            settings.REDIS_URL,
            socket_connect_timeout=2,
            **settings.DELLM_REDIS_OPTIONS,
            max_connections=settings.DELLM_REDIS_MAX_CONNECTIONS,
        )
        _async_clients[loop] = client
    return client


def publish(channel: str, event: str, data: Mapping[str, Any]) -> bool:
    """Say `event` on `channel`; False if Redis is unreachable (the caller logs it: publishing never fails a task)."""
    try:
        redis_client().publish(channel, json.dumps({"event": event, "data": dict(data)}))
    except redis.RedisError:
        return False
    return True


# --- Subscribing ----------------------------------------------------------------


def _confirmed(message: dict[str, Any] | None) -> None:
    if message is None or message.get("type") != "subscribe":
        raise redis.TimeoutError(f"Redis did not confirm a subscription within {SUBSCRIBE_WITHIN}s")


async def subscribe_async(channel: str) -> redis.asyncio.client.PubSub:
    """A subscription to `channel`, confirmed: what is published from now on is received."""
    pubsub = async_redis_client().pubsub()
    try:
        await pubsub.subscribe(channel)
        _confirmed(await pubsub.get_message(timeout=SUBSCRIBE_WITHIN))
    except BaseException:
        await pubsub.aclose()
        raise
    return pubsub


def subscribe_sync(channel: str) -> redis.client.PubSub:
    """`subscribe_async` with the blocking client (WSGI)."""
    pubsub = redis_client().pubsub()
    try:
        pubsub.subscribe(channel)
        _confirmed(pubsub.get_message(timeout=SUBSCRIBE_WITHIN))
    except BaseException:
        pubsub.close()
        raise
    return pubsub
