"""`/v1/`: the OpenAI-compatible endpoint (chat completions and models).

An unmodified OpenAI client works against `http://host/v1` with a DeLLM API
token as its key. Each completion is a DeLLM turn (chat/completions.py says
how the client's transcript is matched to stored messages): the turn runs in
the Celery worker exactly as a turn from the web app, and this view relays the
worker's token events (chat/streams.py) as `chat.completion.chunk` events, or
waits for the reply. The view subscribes to the turn's channel before the turn
is enqueued, so no event is lost, and holds no database connection while it
waits. The reply commits in the worker whether or not the client is still
there: a client that goes away mid-stream finds the whole reply in DeLLM, and
a half one is never stored.

Under an ASGI server the waiting is asynchronous (redis.asyncio); under WSGI
(`runserver`, gunicorn threads) the same relay runs on the request's thread.
"""

import json
import logging
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import redis
import redis.asyncio
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.handlers.asgi import ASGIRequest
from django.db.models.functions import Length
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from chat import completions
from chat.completions_wire import (
    DONE,
    CompletionError,
    CompletionRequest,
    chunk,
    completion,
    completion_id,
    completion_request_parse,
    model_ids,
    sse_data,
    usage,
)
from chat.models import Message, Turn
from chat.streams import channel, turn_subscribe
from dellm_site.errors import DomainError
from provenance import services as deletions
from provenance.requests import parse_deletion_request, resolve_deletion_request

logger = logging.getLogger(__name__)

# As in the web chat (chat/views.py): a typed deletion previews as restorable.
CHAT_DELETION_MODE = "soft"
# How often a waiting request reads the turn's state itself, in case a pub/sub
# message was lost (a Redis reconnect); the events make this a fallback only.
STATE_CHECK_SECONDS = 2.0
PING_SECONDS = 15.0
# Seq numbers listed by a deletion preview answered in the chat.
PREVIEW_LISTED = 10


# --- Authentication and throttling -------------------------------------------


class BearerTokenAuthentication(TokenAuthentication):
    """The DeLLM API token sent as `Authorization: Bearer <token>`, as OpenAI clients send keys.

    The one place to change when the default authentication accepts Bearer
    itself (django-rest-knox): delete this class and `_authenticators` keeps
    only the defaults.
    """

    keyword = "Bearer"


def _authenticators() -> list[Any]:
    # The project's token authentication first, then Bearer for what it does
    # not take. Sessions are left out: `/v1/` is for API clients, and no CSRF
    # token comes with them.
    defaults = [cls() for cls in api_settings.DEFAULT_AUTHENTICATION_CLASSES]
    return [auth for auth in defaults if not isinstance(auth, SessionAuthentication)] + [BearerTokenAuthentication()]


class CompletionThrottle(SimpleRateThrottle):
    """The web chat's budget (`DELLM_CHAT_RATE`, scope `chat`): one per user, shared by both ways in."""

    scope = "chat"

    def get_cache_key(self, request: Request, view: object) -> str:
        return self.cache_format % {"scope": self.scope, "ident": request.user.pk}


def _user(request: HttpRequest) -> Any:
    """The token's user, or CompletionError 401 in OpenAI's words."""
    drf_request = Request(request, authenticators=_authenticators())
    try:
        user = drf_request.user
    except exceptions.AuthenticationFailed as exc:
        raise CompletionError(
            "Incorrect API key provided. Use your DeLLM API token as the key.",
            status=401,
            code="invalid_api_key",
        ) from exc
    if not user or not user.is_authenticated:
        raise CompletionError(
            "You didn't provide an API key. Send your DeLLM API token as 'Authorization: Bearer <token>'.",
            status=401,
            code="missing_api_key",
        )
    request.user = user
    return drf_request


def _throttle(drf_request: Request) -> None:
    throttle = CompletionThrottle()
    if not throttle.allow_request(drf_request, None):
        wait = throttle.wait()
        raise CompletionError(
            "Rate limit reached for chat completions; please try again later.",
            status=429,
            type="requests",
            code="rate_limit_exceeded",
            headers={"Retry-After": str(int(wait or 1))},
        )


def _error_response(error: CompletionError) -> JsonResponse:
    response = JsonResponse(error.body(), status=error.status)
    for name, value in error.headers.items():
        response[name] = value
    if error.status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="api"'
    return response


def _domain_error(exc: DomainError) -> CompletionError:
    param = next(iter(exc.fields), None) if exc.fields else None
    if exc.status == 404:
        return CompletionError(exc.message, status=404, param=param, code=exc.code)
    if exc.status >= 500:
        return CompletionError(exc.message, status=exc.status, type="server_error", code=exc.code)
    return CompletionError(exc.message, status=exc.status, param=param, code=exc.code)


# --- Preparing a completion (synchronous: database work) -----------------------


@dataclass
class Prepared:
    request: CompletionRequest
    owner_id: int
    # A turn to relay, or an answer that is already complete (a deletion preview).
    turn_id: int | None = None
    thread_id: int | None = None
    message_id: int | None = None
    dellm: dict[str, Any] = field(default_factory=dict)
    answer: str | None = None
    answer_id: str = ""


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
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise CompletionError("We could not parse the JSON body of your request.") from None


def _without_deletion_requests(conversation: list[completions.Said]) -> list[completions.Said]:
    """The transcript less the deletion requests typed earlier and the previews that answered them.

    Neither was ever stored, so neither holds a position in the thread.
    """
    kept: list[completions.Said] = []
    skip_answer = False
    for said in conversation:
        if said.role == "user" and parse_deletion_request(said.text) is not None:
            skip_answer = True
            continue
        if skip_answer and said.role == "assistant":
            skip_answer = False
            continue
        skip_answer = False
        kept.append(said)
    return kept


def _deletion_answer(http: HttpRequest, *, owner: Any, text: str, parsed: CompletionRequest) -> Prepared:
    deletion = deletions.deletion_preview(
        owner=owner,
        actor=owner,
        mode=CHAT_DELETION_MODE,
        selector="request",
        **resolve_deletion_request(owner=owner, text=text),
    )
    link = http.build_absolute_uri(f"/?deletion={deletion.pk}")
    seqs = dict(
        Message.objects.filter(owner=owner, pk__in=deletion.matched_ids + deletion.dependent_ids).values_list(
            "pk", "seq"
        )
    )

    def listed(ids: list[int]) -> str:
        numbers = sorted(seqs[pk] for pk in ids if pk in seqs)
        shown = ", ".join(f"#{seq}" for seq in numbers[:PREVIEW_LISTED])
        return shown + (f" and {len(numbers) - PREVIEW_LISTED} more" if len(numbers) > PREVIEW_LISTED else "")

    if deletion.total == 0:
        answer = (
            "Nothing in your DeLLM memory matches this request, so nothing would be deleted. "
            "(This request was not stored.)"
        )
    else:
        answer = (
            f"Nothing has been deleted yet. Forgetting this would remove {deletion.total} "
            f"message{'s' if deletion.total != 1 else ''} from your DeLLM memory: "
            f"{listed(deletion.matched_ids)} matched"
            + (
                f", and {listed(deletion.dependent_ids)} derived from {'them' if deletion.matched_count != 1 else 'it'}"
                if deletion.dependent_ids
                else ""
            )
            + f". Review and confirm (or cancel) in DeLLM: {link}\n\n(This request was not stored.)"
        )
    return Prepared(
        request=parsed,
        owner_id=owner.pk,
        answer=answer,
        answer_id=completion_id(None, deletion.pk),
        dellm={
            "deletion_id": deletion.pk,
            "deletion_url": link,
            "matched": deletion.matched_ids,
            "dependents": deletion.dependent_ids,
            "thread_id": None,
            "turn_id": None,
            "message_id": None,
            "reply_id": None,
            "context": [],
        },
    )


def _prepare(http: HttpRequest) -> Prepared:
    """Authenticate, throttle, validate, then store the turn (or preview a deletion). Raises CompletionError."""
    drf_request = _user(http)
    _throttle(drf_request)
    owner = http.user
    parsed = completion_request_parse(_body(http), thread_header=http.headers.get("X-DeLLM-Thread"))
    conversation = [*_without_deletion_requests(parsed.conversation[:-1]), parsed.conversation[-1]]
    last = conversation[-1]
    try:
        if parse_deletion_request(last.text) is not None:
            return _deletion_answer(http, owner=owner, text=last.text, parsed=parsed)
        started = completions.completion_turn_start(owner=owner, thread_id=parsed.thread_id, conversation=conversation)
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
            "stored": len(started.alignment.new),
            "dropped": started.alignment.dropped,
        },
    )


def _enqueue(prepared: Prepared) -> None:
    from chat.tasks import turn_run_task

    turn_run_task.delay(turn_id=prepared.turn_id, system=prepared.request.system)


@dataclass(frozen=True)
class Outcome:
    done: bool
    text: str = ""
    error: str = ""
    reply_id: int | None = None
    context: tuple[int, ...] = ()
    context_seqs: tuple[int, ...] = ()
    prompt_chars: int = 0


def _outcome(turn_id: int) -> Outcome | None:
    """The finished turn's reply and the memories it used, or None while it runs."""
    turn = Turn.objects.select_related("reply", "user_message").filter(pk=turn_id).first()
    if turn is None:
        return Outcome(done=False, error="The turn was deleted.")
    if turn.status == Turn.Status.FAILED:
        return Outcome(done=False, error=turn.error or "The reply could not be generated.")
    if turn.status != Turn.Status.DONE or turn.reply is None:
        return None
    sources = list(
        turn.reply.in_edges.exclude(source_id=turn.user_message_id)
        .order_by("rank")
        .annotate(chars=Length("source__content"))
        .values_list("source_id", "source__seq", "chars")
    )
    return Outcome(
        done=True,
        text=turn.reply.content,
        reply_id=turn.reply_id,
        context=tuple(row[0] for row in sources),
        context_seqs=tuple(row[1] for row in sources),
        prompt_chars=len(turn.user_message.content) + sum(row[2] or 0 for row in sources),
    )


# --- Relaying the turn ---------------------------------------------------------


class Relay:
    """Turns the worker's events into OpenAI chunks.

    Sent text cannot be taken back in this format. When the worker resets (the
    context changed under the reply, or a retry), the stream says so and then
    carries the new reply; the text stored in DeLLM is the final one, and a
    client that replays its copy later is matched by position, not by text.
    """

    RESET_NOTE = "\n\n[DeLLM: memory changed while this reply was written; here it is again.]\n\n"

    def __init__(self, prepared: Prepared) -> None:
        self.prepared = prepared
        self.id = completion_id(prepared.turn_id)
        self.created = int(time.time())
        self.sent = ""
        self.since_reset = ""
        self.was_reset = False

    def _chunk(self, **kwargs: Any) -> str:
        kwargs.setdefault("with_usage", self.prepared.request.include_usage)
        return chunk(id=self.id, model=self.prepared.request.model, created=self.created, **kwargs)

    def start(self) -> list[str]:
        return [self._chunk(delta={"role": "assistant", "content": ""})]

    def _text(self, text: str) -> list[str]:
        out = []
        if self.was_reset and self.sent and not self.since_reset:
            out.append(self._chunk(delta={"content": self.RESET_NOTE}))
            self.sent += self.RESET_NOTE
        self.sent += text
        self.since_reset += text
        out.append(self._chunk(delta={"content": text}))
        return out

    def event(self, payload: dict[str, Any]) -> tuple[list[str], bool]:
        """Chunks for one pub/sub event, and whether the turn's state should be read now."""
        name = payload.get("event")
        if name == "token":
            return self._text(str(payload.get("data", {}).get("text", ""))), False
        if name == "reset":
            self.was_reset = True
            self.since_reset = ""
            return [], False
        return [], name == "changed"

    def finish(self, outcome: Outcome) -> list[str]:
        if not outcome.done:
            error = CompletionError(outcome.error, status=502, type="server_error", code="upstream_error")
            return [sse_data(error.body())]
        out: list[str] = []
        if outcome.text != self.since_reset:
            # Tokens missed (published before a reconnect) or a reply that differs from what streamed.
            rest = outcome.text[len(self.since_reset) :] if outcome.text.startswith(self.since_reset) else None
            if rest is None:
                self.was_reset, self.since_reset = True, ""
                out += self._text(outcome.text)
            elif rest:
                out += self._text(rest)
        out.append(self._chunk(delta={}, finish_reason="stop", dellm=_dellm(self.prepared, outcome)))
        if self.prepared.request.include_usage:
            out.append(
                chunk(
                    id=self.id,
                    model=self.prepared.request.model,
                    created=self.created,
                    usage=_usage(self.prepared, outcome),
                    usage_chunk=True,
                )
            )
        out.append(DONE)
        return out

    def timeout(self) -> list[str]:
        error = CompletionError(
            f"The reply is taking too long; it will still appear in DeLLM (turn {self.prepared.turn_id}).",
            status=504,
            type="server_error",
            code="timeout",
        )
        return [sse_data(error.body())]


def _dellm(prepared: Prepared, outcome: Outcome) -> dict[str, Any]:
    return prepared.dellm | {
        "reply_id": outcome.reply_id,
        "context": list(outcome.context),
        "context_seqs": list(outcome.context_seqs),
    }


def _usage(prepared: Prepared, outcome: Outcome) -> dict[str, int]:
    return usage("x" * (outcome.prompt_chars + len(prepared.request.system)), outcome.text)


def _turn_headers(response: HttpResponse, prepared: Prepared, outcome: Outcome | None = None) -> HttpResponse:
    response["Cache-Control"] = "no-store"
    if prepared.thread_id is not None:
        response["X-DeLLM-Thread"] = str(prepared.thread_id)
        response["X-DeLLM-Turn"] = str(prepared.turn_id)
        response["X-DeLLM-Message"] = str(prepared.message_id)
    if outcome is not None and outcome.done:
        response["X-DeLLM-Reply"] = str(outcome.reply_id)
        response["X-DeLLM-Context"] = ",".join(str(pk) for pk in outcome.context)
    if "deletion_id" in prepared.dellm:
        response["X-DeLLM-Deletion"] = str(prepared.dellm["deletion_id"])
    return response


def _stream_response(events: Iterator[str] | AsyncIterator[str], prepared: Prepared) -> StreamingHttpResponse:
    response = StreamingHttpResponse(events, content_type="text/event-stream")
    response["X-Accel-Buffering"] = "no"
    return _turn_headers(response, prepared)


def _answer_response(prepared: Prepared) -> HttpResponse:
    """A deletion preview, already complete: one completion, or a short stream."""
    assert prepared.answer is not None
    request = prepared.request
    if not request.stream:
        body = completion(
            id=prepared.answer_id,
            model=request.model,
            text=prepared.answer,
            dellm=prepared.dellm,
            usage=usage(request.conversation[-1].text, prepared.answer),
        )
        return _turn_headers(JsonResponse(body), prepared)
    created = int(time.time())
    extra = {"with_usage": request.include_usage}
    parts = [
        chunk(
            id=prepared.answer_id,
            model=request.model,
            created=created,
            delta={"role": "assistant", "content": ""},
            **extra,
        ),
        chunk(id=prepared.answer_id, model=request.model, created=created, delta={"content": prepared.answer}, **extra),
        chunk(
            id=prepared.answer_id,
            model=request.model,
            created=created,
            delta={},
            finish_reason="stop",
            dellm=prepared.dellm,
            **extra,
        ),
    ]
    if request.include_usage:
        parts.append(
            chunk(
                id=prepared.answer_id,
                model=request.model,
                created=created,
                usage=usage(request.conversation[-1].text, prepared.answer),
                usage_chunk=True,
            )
        )
    parts.append(DONE)
    return _stream_response(iter(parts), prepared)


# Asynchronous waiting (ASGI) ------------------------------------------------


async def _subscribe_async(turn_id: int) -> tuple[redis.asyncio.Redis, redis.asyncio.client.PubSub]:
    client = redis.asyncio.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2)
    pubsub = client.pubsub()
    await pubsub.subscribe(channel(turn_id))
    # Wait for Redis to confirm, so that nothing the worker publishes is missed.
    while (await pubsub.get_message(timeout=2.0)) is None:
        pass
    return client, pubsub


async def _events_async(
    prepared: Prepared, client: redis.asyncio.Redis, pubsub: redis.asyncio.client.PubSub
) -> AsyncIterator[str]:
    relay = Relay(prepared)
    outcome_of = sync_to_async(_outcome)
    try:
        for part in relay.start():
            yield part
        deadline = time.monotonic() + settings.DELLM_SSE_TIMEOUT
        next_check = time.monotonic() + STATE_CHECK_SECONDS
        next_ping = time.monotonic() + PING_SECONDS
        while time.monotonic() < deadline:
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
            check = time.monotonic() >= next_check
            if message is not None:
                parts, changed = relay.event(json.loads(message["data"]))
                for part in parts:
                    yield part
                check = check or changed
            if check:
                next_check = time.monotonic() + STATE_CHECK_SECONDS
                outcome = await outcome_of(prepared.turn_id)
                if outcome is not None:
                    for part in relay.finish(outcome):
                        yield part
                    return
            if time.monotonic() >= next_ping:
                next_ping = time.monotonic() + PING_SECONDS
                yield ": ping\n\n"
        for part in relay.timeout():
            yield part
    finally:
        # Also on a client that went away (the server cancels this generator):
        # the turn goes on in the worker and commits whole.
        await pubsub.aclose()
        await client.aclose()


async def _wait_async(prepared: Prepared, pubsub: redis.asyncio.client.PubSub) -> Outcome | None:
    deadline = time.monotonic() + settings.DELLM_SSE_TIMEOUT
    next_check = time.monotonic() + STATE_CHECK_SECONDS
    outcome_of = sync_to_async(_outcome)
    while time.monotonic() < deadline:
        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
        changed = message is not None and json.loads(message["data"]).get("event") == "changed"
        if changed or time.monotonic() >= next_check:
            next_check = time.monotonic() + STATE_CHECK_SECONDS
            outcome = await outcome_of(prepared.turn_id)
            if outcome is not None:
                return outcome
    return None


# Synchronous waiting (WSGI) -------------------------------------------------


def _events_sync(prepared: Prepared, pubsub: redis.client.PubSub) -> Iterator[str]:
    relay = Relay(prepared)
    try:
        yield from relay.start()
        deadline = time.monotonic() + settings.DELLM_SSE_TIMEOUT
        next_check = time.monotonic() + STATE_CHECK_SECONDS
        while time.monotonic() < deadline:
            message = pubsub.get_message(timeout=1.0)
            check = time.monotonic() >= next_check
            if message is not None:
                parts, changed = relay.event(json.loads(message["data"]))
                yield from parts
                check = check or changed
            if check:
                next_check = time.monotonic() + STATE_CHECK_SECONDS
                outcome = _outcome(prepared.turn_id)
                if outcome is not None:
                    yield from relay.finish(outcome)
                    return
        yield from relay.timeout()
    finally:
        pubsub.close()


def _wait_sync(prepared: Prepared, pubsub: redis.client.PubSub) -> Outcome | None:
    deadline = time.monotonic() + settings.DELLM_SSE_TIMEOUT
    next_check = time.monotonic() + STATE_CHECK_SECONDS
    try:
        while time.monotonic() < deadline:
            message = pubsub.get_message(timeout=1.0)
            changed = message is not None and json.loads(message["data"]).get("event") == "changed"
            if changed or time.monotonic() >= next_check:
                next_check = time.monotonic() + STATE_CHECK_SECONDS
                outcome = _outcome(prepared.turn_id)
                if outcome is not None:
                    return outcome
        return None
    finally:
        pubsub.close()


def _completion_response(prepared: Prepared, outcome: Outcome | None) -> HttpResponse:
    if outcome is None:
        error = CompletionError(
            f"The reply is taking too long; it will still appear in DeLLM (turn {prepared.turn_id}).",
            status=504,
            type="server_error",
            code="timeout",
        )
        return _turn_headers(_error_response(error), prepared)
    if not outcome.done:
        error = CompletionError(outcome.error, status=502, type="server_error", code="upstream_error")
        return _turn_headers(_error_response(error), prepared)
    body = completion(
        id=completion_id(prepared.turn_id),
        model=prepared.request.model,
        text=outcome.text,
        dellm=_dellm(prepared, outcome),
        usage=_usage(prepared, outcome),
    )
    return _turn_headers(JsonResponse(body), prepared, outcome)


# --- Views -----------------------------------------------------------------------


def _unexpected(exc: Exception) -> JsonResponse:
    logger.exception("unhandled error in the OpenAI-compatible endpoint (%s)", type(exc).__name__)
    error = CompletionError("Something went wrong on our side; please try again.", status=500, type="server_error")
    return _error_response(error)


@csrf_exempt
async def chat_completions(request: HttpRequest) -> HttpResponse:
    """`POST /v1/chat/completions`."""
    if request.method != "POST":
        error = CompletionError(f"Method {request.method} is not allowed here; use POST.", status=405)
        response = _error_response(error)
        response["Allow"] = "POST"
        return response
    try:
        prepared = await sync_to_async(_prepare)(request)
    except CompletionError as error:
        return _error_response(error)
    except Exception as exc:
        return _unexpected(exc)
    if prepared.answer is not None:
        return _answer_response(prepared)
    assert prepared.turn_id is not None
    if isinstance(request, ASGIRequest):
        client, pubsub = await _subscribe_async(prepared.turn_id)
        await sync_to_async(_enqueue)(prepared)
        if prepared.request.stream:
            return _stream_response(_events_async(prepared, client, pubsub), prepared)
        try:
            outcome = await _wait_async(prepared, pubsub)
        finally:
            await pubsub.aclose()
            await client.aclose()
        return await sync_to_async(_completion_response)(prepared, outcome)
    # Under WSGI this coroutine runs in its own event loop on the request's
    # thread; blocking Redis calls are what that thread is for.
    sync_pubsub = await sync_to_async(turn_subscribe)(prepared.turn_id)
    await sync_to_async(_enqueue)(prepared)
    if prepared.request.stream:
        return _stream_response(_events_sync(prepared, sync_pubsub), prepared)
    outcome = await sync_to_async(_wait_sync)(prepared, sync_pubsub)
    return await sync_to_async(_completion_response)(prepared, outcome)


def _model(model_id: str) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": 0, "owned_by": "dellm"}


def _authorized(request: HttpRequest) -> JsonResponse | None:
    if request.method != "GET":
        response = _error_response(CompletionError(f"Method {request.method} is not allowed here.", status=405))
        response["Allow"] = "GET"
        return response
    try:
        _user(request)
    except CompletionError as error:
        return _error_response(error)
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
        return _error_response(error)
    return JsonResponse(_model(model_id))


def not_found(request: HttpRequest) -> JsonResponse:
    """Any other address under `/v1/`."""
    error = CompletionError(f"Invalid URL ({request.method} {request.path}).", status=404, code="unknown_url")
    return _error_response(error)
