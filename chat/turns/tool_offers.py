"""A `/v1` turn's tool definitions, held in Redis while the turn runs.

A client's `tools` (with `tool_choice` and `parallel_tool_calls`) are not
memory: they are never stored in the database, never put in a task payload
(tasks take ids) and never logged. The worker still needs them to pass them
upstream, so the endpoint puts them under the turn's key just before it
enqueues the turn, the worker reads them on every attempt (retries included)
and deletes them when the turn ends; the key expires after
DELLM_SSE_TIMEOUT plus a minute in any case (a lost task, a killed worker).
A turn re-run after that (the stuck-turn sweep) is answered without tools,
in text. The registry (provenance/erasure/registry.py) lists the place.
"""

import json
import logging

import redis
from django.conf import settings

from chat.llm import ToolOffer
from core.redis_ns import key
from core.streams.pubsub import redis_client

logger = logging.getLogger(__name__)

# Past the longest wait of the client that sent them (DELLM_SSE_TIMEOUT), a turn's reply reaches nobody anyway.
GRACE_SECONDS = 60


def tools_key(turn_id: int) -> str:
    return key(settings.DELLM_REDIS_PREFIX, "turn-tools", turn_id)


def turn_tools_put(*, turn_id: int, offer: ToolOffer) -> None:
    """Hold `offer` for the turn. Raises redis.RedisError (the caller fails the turn: it was not queued)."""
    payload = {"tools": offer.tools, "choice": offer.choice, "parallel": offer.parallel}
    redis_client().set(tools_key(turn_id), json.dumps(payload), ex=int(settings.DELLM_SSE_TIMEOUT) + GRACE_SECONDS)


def turn_tools_get(*, turn_id: int) -> ToolOffer | None:
    """The turn's tools, or None (none were offered, they expired, or Redis is out): the model answers in text."""
    try:
        raw = redis_client().get(tools_key(turn_id))
    except redis.RedisError as exc:
        logger.warning("turn %s: could not read its tools (%s); answered without", turn_id, type(exc).__name__)
        return None
    if raw is None:
        return None
    payload = json.loads(raw)
    return ToolOffer(tools=payload["tools"], choice=payload["choice"], parallel=payload["parallel"])


def turn_tools_drop(*, turn_id: int) -> None:
    """Forget the turn's tools (it ended). Never fails the turn: the key expires anyway."""
    try:
        redis_client().delete(tools_key(turn_id))
    except redis.RedisError as exc:
        logger.warning("turn %s: could not drop its tools (%s); they expire", turn_id, type(exc).__name__)
