"""Live turn events between the worker and the SSE endpoint, over Redis pub/sub.

Tokens of a reply being generated travel on a per-turn channel. Pub/sub is
fire-and-forget: nothing is stored in Redis, so a purge leaves no residue
there; a subscriber that joins late just gets the final reply from the
database. Publishing never fails a turn.
"""

import functools
import json
import logging

import redis
from django.conf import settings

logger = logging.getLogger(__name__)


@functools.cache
def _client() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=2)


def channel(turn_id: int) -> str:
    return f"dellm:turn:{turn_id}"


def turn_publish(turn_id: int, event: str, data: dict) -> None:
    try:
        _client().publish(channel(turn_id), json.dumps({"event": event, "data": data}))
    except redis.RedisError:
        logger.warning("turn %s: could not publish a %s event", turn_id, event)


def turn_subscribe(turn_id: int) -> redis.client.PubSub:
    pubsub = _client().pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(channel(turn_id))
    return pubsub
