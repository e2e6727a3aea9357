"""`/v1/`: the OpenAI-compatible endpoint (chat completions and models).

An unmodified OpenAI client works against `http://host/v1` with a DeLLM API
token as its key. Each completion is a DeLLM turn (assistant/openai/transcript.py says
how the client's transcript is matched to stored messages): the turn runs in
the Celery worker exactly as a turn from the web app, and this view relays the
worker's token events (chat/turns/stream.py) as `chat.completion.chunk` events, or
waits for the reply. The view subscribes to the turn's channel before the turn
is enqueued, so no event is lost, and holds no database connection while it
waits. The reply commits in the worker whether or not the client is still
there: a client that goes away mid-stream finds the whole reply in DeLLM, and
a half one is never stored.

The waiting, the stream slot and the connection release are the event-stream
kit's (core/streams/): asynchronous under an ASGI server; under
WSGI (`runserver`, gunicorn threads) the same loop runs on the request's thread.
"""

import logging
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar, cast

import redis
import redis.asyncio
from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import RequestDataTooBig
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt
from kombu.exceptions import KombuError
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, SessionAuthentication
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.views import APIView

from assistant.openai import transcript
from assistant.openai.deletions import deletion_answer, without_deletion_requests
from assistant.openai.relay import (
    Prepared,
    answer_response,
    completion_response,
    error_response,
    events_async,
    events_sync,
    stream_response,
    wait_async,
    wait_sync,
)
from assistant.openai.wire import (
    CompletionError,
    CompletionRequest,
    completion_request_parse,
    model_ids,
    stream_refusal,
)
from chat.turns.recovery import turn_fail
from chat.turns.stream import channel
from chat.turns.tool_offers import turn_tools_put
from core import overload
from core.api.json_body import json_parse
from core.errors import DomainError
from core.streams.endpoint import on_db_briefly
from core.streams.pubsub import subscribe_async, subscribe_sync
from core.streams.slots import StreamRefused, StreamSlot, stream_slot_take
from provenance.deletions.forget_phrases import parse_deletion_request

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

# --- Authentication and throttling -------------------------------------------


def _authenticators() -> list[BaseAuthentication]:
    # The project's authentication (knox tokens under `Token` or `Bearer`,
    # core/auth/tokens.py), less sessions: `/v1/` is for API clients, and no
    # CSRF token comes with them.
    classes = cast("list[type[BaseAuthentication]]", api_settings.DEFAULT_AUTHENTICATION_CLASSES)
    return [auth for auth in (cls() for cls in classes) if not isinstance(auth, SessionAuthentication)]


class CompletionThrottle(SimpleRateThrottle):
    """The web chat's budget (`DELLM_CHAT_RATE`, scope `chat`): one per user, shared by both ways in."""

    scope = "chat"

    def get_cache_key(self, request: Request, view: object) -> str:
        return self.cache_format % {"scope": self.scope, "ident": request.user.pk}


def _user(request: HttpRequest) -> tuple[Request, User]:
    """The request as DRF sees it and the token's user, or CompletionError 401 in OpenAI's words."""
    drf_request = Request(request, authenticators=_authenticators())
    try:
        user = drf_request.user
    except exceptions.AuthenticationFailed as exc:
        raise CompletionError(
            "Incorrect API key provided. Use your DeLLM API token as the key.",
            status=401,
            code="invalid_api_key",
        ) from exc
    except exceptions.PermissionDenied as exc:  # an agent token: it opens /mcp only
        raise CompletionError(str(exc.detail), status=403, code="agent_token") from exc
    if not user or not user.is_authenticated:
        raise CompletionError(
            "You didn't provide an API key. Send your DeLLM API token as 'Authorization: Bearer <token>'.",
            status=401,
            # OpenAI's code for any key it does not accept, the one clients look for.
            code="invalid_api_key",
        )
    return drf_request, user


def _throttle(drf_request: Request) -> None:
    throttle = CompletionThrottle()
    if not throttle.allow_request(drf_request, APIView()):
        wait = throttle.wait()
        raise CompletionError(
            "Rate limit reached for chat completions; please try again later.",
            status=429,
            type="requests",
            code="rate_limit_exceeded",
            headers={"Retry-After": str(int(wait or 1))},
        )


def _domain_error(exc: DomainError) -> CompletionError:
    param = next(iter(exc.fields), None) if exc.fields else None
    if exc.status == 404:
        return CompletionError(exc.message, status=404, param=param, code=exc.code)
    if exc.status >= 500:
        return CompletionError(exc.message, status=exc.status, type="server_error", code=exc.code)
    if exc.retry_after:
        # OpenAI's own quota refusal: 429 `insufficient_quota`; the client may retry after the delay.
        return CompletionError(
            exc.message,
            status=exc.status,
            type="insufficient_quota",
            param=param,
            code=exc.code,
            headers={"Retry-After": str(exc.retry_after)},
        )
    return CompletionError(exc.message, status=exc.status, param=param, code=exc.code)


# --- Preparing a completion (synchronous: database work) -----------------------


def _body(request: HttpRequest) -> object:
    length = request.META.get("CONTENT_LENGTH") or "0"
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    too_big = CompletionError(f"The request body is larger than {limit} bytes.", status=413, code="request_too_large")
    if length.isdigit() and limit is not None and int(length) > limit:
        raise too_big
    try:
        raw = request.body
    except RequestDataTooBig:
        raise too_big from None
    try:
        return json_parse(raw)
    except ValueError:
        # Invalid JSON or UTF-8, or nested deeper than DELLM_JSON_MAX_DEPTH (core/api/json_body.py).
        raise CompletionError("We could not parse the JSON body of your request.") from None


def _trailing_results(conversation: list[transcript.Said]) -> list[transcript.Said]:
    """The `tool` messages that end the conversation (the wire format checked they answer the calls before them)."""
    start = len(conversation)
    while start > 0 and conversation[start - 1].role == "tool":
        start -= 1
    return conversation[start:]


def _admit(http: HttpRequest) -> tuple[User, CompletionRequest]:
    """Authenticate, throttle and validate; nothing is stored yet. Raises CompletionError."""
    drf_request, owner = _user(http)
    _throttle(drf_request)
    parsed = completion_request_parse(_body(http), thread_header=http.headers.get("X-DeLLM-Thread"))
    return owner, parsed


def _store(http: HttpRequest, owner: User, parsed: CompletionRequest) -> Prepared:
    """Store the turn (or preview a deletion) of an admitted request. Raises CompletionError."""
    conversation = [*without_deletion_requests(parsed.conversation[:-1]), parsed.conversation[-1]]
    last = conversation[-1]
    try:
        if last.role == "tool":
            # The client's tool results for the calls before them: a turn answers them (docs/OPENAI.md).
            results = _trailing_results(conversation)
            started = transcript.completion_tool_turn_start(
                owner=owner,
                thread_id=parsed.thread_id,
                earlier=conversation[: -len(results)],
                results=results,
                system=parsed.system,
            )
        elif parse_deletion_request(last.text) is not None:
            return deletion_answer(http, owner=owner, text=last.text, parsed=parsed)
        else:
            started = transcript.completion_turn_start(
                owner=owner, thread_id=parsed.thread_id, conversation=conversation, system=parsed.system
            )
    except DomainError as exc:
        raise _domain_error(exc) from None
    return Prepared(
        request=parsed,
        owner_id=owner.pk,
        turn_id=started.turn.pk,
        thread_id=started.thread.pk,
        message_id=started.turn.user_message_id,
        dellm={
            "thread_id": started.thread.pk,
            "turn_id": started.turn.pk,
            "message_id": started.turn.user_message_id,
            "system_message_id": started.turn.system_message_id,
            "stored": started.alignment.stored,
            "dropped": started.alignment.dropped,
        },
    )


# --- Stream slots (the per-user cap shared with /api/ streams, core/streams/slots.py) ---


async def _stream_slot(owner_id: int, *, stream: bool) -> StreamSlot:
    """One of the user's DELLM_MAX_STREAMS_PER_USER slots, or CompletionError 429 (503 without Redis).

    A request without `stream` takes one too: it waits as long as a stream
    stays open (DELLM_SSE_TIMEOUT), holding a Redis connection all the while.
    """
    instead = "or ask without `stream`" if stream else "a request waiting for its answer holds one too"
    try:
        return await stream_slot_take(owner_id, what="completion", instead=instead)
    except StreamRefused as refused:
        raise stream_refusal(refused) from None


def _enqueue(prepared: Prepared) -> None:
    from chat.turns.tasks import turn_run_task

    if prepared.request.tools is not None:
        # Held for the worker while the turn runs, never in the task payload (chat/turns/tool_offers.py).
        turn_tools_put(turn_id=prepared.turn, offer=prepared.request.tools)
    turn_run_task.delay(turn_id=prepared.turn, owner_id=prepared.owner_id)


# --- Views -----------------------------------------------------------------------


def _unexpected(exc: Exception) -> JsonResponse:
    if overload.database_unavailable(exc):
        # The pool is full or the database is down: a 503 to retry, as the REST API answers.
        overload.log_unavailable(exc, "chat_completions")
        error = CompletionError(
            overload.MESSAGE,
            status=503,
            type="server_error",
            code="service_unavailable",
            headers={"Retry-After": str(overload.RETRY_AFTER_SECONDS)},
        )
        return error_response(error)
    logger.exception("unhandled error in the OpenAI-compatible endpoint (%s)", type(exc).__name__)
    error = CompletionError("Something went wrong on our side; please try again.", status=500, type="server_error")
    return error_response(error)


@csrf_exempt
async def chat_completions(request: HttpRequest) -> HttpResponseBase:
    """`POST /v1/chat/completions`."""
    if request.method != "POST":
        error = CompletionError(f"Method {request.method} is not allowed here; use POST.", status=405)
        response = error_response(error)
        response["Allow"] = "POST"
        return response
    asgi = isinstance(request, ASGIRequest)

    def on_db(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
        # Under ASGI the request has no thread of its own (dellm_site/asgi.py, LONG_LIVED): the
        # database work runs on a pool thread and hands its connection back.
        return on_db_briefly(fn) if asgi else sync_to_async(fn)

    slot: StreamSlot | None = None
    try:
        owner, parsed = await on_db(_admit)(request)
        # Before anything is stored: a refused request leaves no turn behind.
        slot = await _stream_slot(int(owner.pk), stream=parsed.stream)
        prepared = await on_db(_store)(request, owner, parsed)
    except CompletionError as error:
        await _release(slot)
        return error_response(error)
    except Exception as exc:
        await _release(slot)
        return _unexpected(exc)
    if prepared.answer is not None:
        # Complete already: the stream, if any, is over as soon as it is sent.
        await _release(slot)
        return answer_response(prepared, asgi=asgi)
    assert prepared.turn_id is not None
    pubsub: redis.asyncio.client.PubSub | None = None
    sync_pubsub: redis.client.PubSub | None = None
    try:
        # Subscribed before the turn is enqueued: the worker cannot publish before we listen.
        if asgi:
            pubsub = await subscribe_async(channel(prepared.turn_id))
        else:
            sync_pubsub = await sync_to_async(subscribe_sync)(channel(prepared.turn_id))
        await sync_to_async(_enqueue)(prepared)
    except (redis.RedisError, KombuError, OSError) as exc:
        if pubsub is not None:
            await pubsub.aclose()
        if sync_pubsub is not None:
            await sync_to_async(sync_pubsub.close)()
        await _release(slot)
        return await sync_to_async(_not_queued)(prepared, exc)
    assert slot is not None
    if pubsub is not None:
        if parsed.stream:
            return stream_response(slot.releasing_async(events_async(prepared, pubsub)), prepared)
        try:
            outcome = await wait_async(prepared, pubsub)
        finally:
            await slot.release()
        return await sync_to_async(completion_response)(prepared, outcome)
    # Under WSGI this coroutine runs in its own event loop on the request's
    # thread; blocking Redis calls are what that thread is for.
    assert sync_pubsub is not None
    if parsed.stream:
        return stream_response(slot.releasing_sync(events_sync(prepared, sync_pubsub)), prepared)
    try:
        outcome = await sync_to_async(wait_sync)(prepared, sync_pubsub)
    finally:
        await slot.release()
    return await sync_to_async(completion_response)(prepared, outcome)


async def _release(slot: StreamSlot | None) -> None:
    if slot is not None:
        await slot.release()


def _not_queued(prepared: Prepared, exc: Exception) -> JsonResponse:
    """Redis (broker or pub/sub) is unreachable: the turn fails visibly and can be retried from the web app."""
    logger.warning("completion turn %s: could not be queued (%s)", prepared.turn_id, type(exc).__name__)
    turn_fail(turn_id=prepared.turn, owner_id=prepared.owner_id, error="The reply could not be queued; please retry.")
    error = CompletionError(
        "DeLLM cannot reach its task queue right now; please try again.",
        status=503,
        type="server_error",
        code="service_unavailable",
        headers={"Retry-After": "5"},
    )
    return error_response(error)


def _model(model_id: str) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": 0, "owned_by": "dellm"}


def _authorized(request: HttpRequest) -> JsonResponse | None:
    if request.method != "GET":
        response = error_response(CompletionError(f"Method {request.method} is not allowed here.", status=405))
        response["Allow"] = "GET"
        return response
    try:
        _user(request)
    except CompletionError as error:
        return error_response(error)
    return None


def models(request: HttpRequest) -> HttpResponse:
    """`GET /v1/models`: the one model DeLLM serves (`DELLM_OPENAI_MODEL`)."""
    refused = _authorized(request)
    if refused is not None:
        return refused
    return JsonResponse({"object": "list", "data": [_model(model_id) for model_id in model_ids()]})


def model_detail(request: HttpRequest, model_id: str) -> HttpResponse:
    """`GET /v1/models/{id}`."""
    refused = _authorized(request)
    if refused is not None:
        return refused
    if model_id not in model_ids():
        error = CompletionError(
            f"The model '{model_id}' does not exist or you do not have access to it.",
            status=404,
            param="model",
            code="model_not_found",
        )
        return error_response(error)
    return JsonResponse(_model(model_id))


def not_found(request: HttpRequest) -> JsonResponse:
    """Any other address under `/v1/`."""
    error = CompletionError(f"Invalid URL ({request.method} {request.path}).", status=404, code="unknown_url")
    return error_response(error)
