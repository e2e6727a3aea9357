"""Relaying a `/v1/` turn to its client: the worker's events as OpenAI chunks, or one completion.

A formatter over the event-stream kit (core/streams/): the view
(assistant/openai/views.py) subscribes to the turn's channel
(chat/turns/stream.py) before it enqueues the turn; the kit's wait loop reads the
subscription (asynchronously under ASGI, with no thread or database
connection held between two short reads of the turn; on the request's thread
under WSGI), and `Relay` says what each event is in OpenAI's words. Either
way the turn commits in the worker, whatever happens to the client.
"""

import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import redis
import redis.asyncio
from django.conf import settings
from django.db.models.functions import Length
from django.http import HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase

from assistant.openai.wire import (
    DONE,
    CompletionError,
    CompletionRequest,
    chunk,
    completion,
    completion_id,
    sse_data,
    usage,
)
from chat.models import INDEX_FIELDS, ContextEdge, Message, Turn
from chat.retrieval.facts import fact_sources
from core.streams.endpoint import on_db_briefly
from core.streams.sse import event_stream_response
from core.streams.wait import Watch, watch_async, watch_sync

# How often a waiting request reads the turn's state itself, in case a pub/sub
# message was lost (a Redis reconnect); the events make this a fallback only.
STATE_CHECK_SECONDS = 2.0

R = TypeVar("R", bound=HttpResponseBase)


def error_response(error: CompletionError) -> JsonResponse:
    response = JsonResponse(error.body(), status=error.status)
    for name, value in error.headers.items():
        response[name] = value
    if error.status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="api"'
    return response


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

    @property
    def turn(self) -> int:
        """The turn's id (a prepared turn, not an answer)."""
        if self.turn_id is None:
            raise ValueError("no turn: this completion was answered directly")
        return self.turn_id


@dataclass(frozen=True)
class Outcome:
    done: bool
    text: str = ""
    error: str = ""
    reply_id: int | None = None
    context: tuple[int, ...] = ()
    context_seqs: tuple[int, ...] = ()
    # The facts among `context`, in its order: (fact id, the live messages it was drawn from).
    facts: tuple[tuple[int, tuple[int, ...]], ...] = ()
    prompt_chars: int = 0
    # The model called the client's tools: [{"id", "name", "arguments"}] (finish_reason "tool_calls").
    tool_calls: tuple[dict[str, str], ...] = ()


def turn_outcome(turn_id: int, owner_id: int) -> Outcome | None:
    """The finished turn's reply and the memories it used, or None while it runs."""
    turn = Turn.objects.filter(owner_id=owner_id, pk=turn_id).first()
    if turn is None:
        return Outcome(done=False, error="The turn was deleted.")
    if turn.status == Turn.Status.FAILED:
        return Outcome(done=False, error=turn.error or "The reply could not be generated.")
    if turn.status != Turn.Status.DONE or turn.reply_id is None:
        return None
    # Read by (owner, id), not through the turn's foreign keys: each query then reads the owner's partition only.
    messages = {
        message.pk: message
        for message in Message.objects.filter(owner_id=owner_id, pk__in=[turn.reply_id, turn.user_message_id]).defer(
            *INDEX_FIELDS
        )
    }
    turn.reply, turn.user_message = messages[turn.reply_id], messages[turn.user_message_id]
    # The memories: the question and the system prompt are not (the prompt's id is `dellm.system_message_id`).
    sources = list(
        ContextEdge.objects.filter(owner_id=owner_id, target_id=turn.reply_id, source__owner_id=owner_id)
        .exclude(source_id=turn.user_message_id)
        .exclude(signal__in=[ContextEdge.Signal.SYSTEM, ContextEdge.Signal.TOOL])
        .order_by("rank")
        .annotate(chars=Length("source__content"))
        .values_list("source_id", "source__seq", "chars", "source__role")
    )
    facts = [row[0] for row in sources if row[3] == Message.Role.FACT]
    drawn_from = fact_sources(owner_id=owner_id, ids=facts)
    return Outcome(
        done=True,
        text=turn.reply.content,
        reply_id=turn.reply_id,
        context=tuple(row[0] for row in sources),
        context_seqs=tuple(row[1] for row in sources),
        facts=tuple((pk, tuple(drawn_from.get(pk, ()))) for pk in facts),
        prompt_chars=len(turn.user_message.content) + sum(row[2] or 0 for row in sources),
        tool_calls=tuple(turn.reply.tool_calls or ()),
    )


# An asynchronous wait holds no connection between two reads.
turn_outcome_briefly = on_db_briefly(turn_outcome)


# --- Relaying the turn ---------------------------------------------------------


class Relay(Watch[Outcome | None]):
    """Turns the worker's events into OpenAI chunks (`start`, `event`, `finish`, `timeout`).

    Sent text cannot be taken back in this format. When the worker resets (the
    context changed under the reply, or a retry), the stream says so and then
    carries the new reply; the text stored in DeLLM is the final one, and a
    client that replays its copy later is matched by position, not by text.
    """

    RESET_NOTE = "\n\n[DeLLM: memory changed while this reply was written; here it is again.]\n\n"
    # Characters of a call's arguments per chunk: clients assemble the fragments, as from OpenAI.
    ARGUMENT_FRAGMENT = 16

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
        out += self._tool_calls(outcome)
        finish = "tool_calls" if outcome.tool_calls else "stop"
        out.append(self._chunk(delta={}, finish_reason=finish, dellm=_dellm(self.prepared, outcome)))
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

    def _tool_calls(self, outcome: Outcome) -> list[str]:
        """The reply's tool calls as OpenAI streams them: per call, its index, id and name, then its arguments
        in fragments. Sent once the call is stored: a client never runs a tool for a call DeLLM dropped."""
        out = []
        for index, call in enumerate(outcome.tool_calls):
            function = {"name": call["name"], "arguments": ""}
            opening = {"index": index, "id": call["id"], "type": "function", "function": function}
            out.append(self._chunk(delta={"tool_calls": [opening]}))
            arguments = call["arguments"]
            for start in range(0, len(arguments), self.ARGUMENT_FRAGMENT):
                fragment = arguments[start : start + self.ARGUMENT_FRAGMENT]
                out.append(self._chunk(delta={"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}))
        return out

    def timeout(self) -> list[str]:
        error = CompletionError(
            f"The reply is taking too long; it will still appear in DeLLM (turn {self.prepared.turn_id}).",
            status=504,
            type="server_error",
            code="timeout",
        )
        return [sse_data(error.body())]

    # The kit's Watch: the turn's outcome is its state (None while it runs).
    def opening(self) -> list[str]:
        return self.start()

    def message(self, payload: dict[str, Any]) -> tuple[list[str], bool]:
        return self.event(payload)

    def state(self, state: Outcome | None) -> tuple[list[str], bool]:
        return ([], False) if state is None else (self.finish(state), True)


class Waiting(Watch[Outcome | None]):
    """A non-streaming completion: nothing is sent while the turn runs; its outcome is kept."""

    def __init__(self) -> None:
        self.outcome: Outcome | None = None

    def message(self, payload: dict[str, Any]) -> tuple[list[str], bool]:
        return [], payload.get("event") == "changed"

    def state(self, state: Outcome | None) -> tuple[list[str], bool]:
        self.outcome = state
        return [], state is not None


def _dellm(prepared: Prepared, outcome: Outcome) -> dict[str, Any]:
    return prepared.dellm | {
        "reply_id": outcome.reply_id,
        "context": list(outcome.context),
        "context_seqs": list(outcome.context_seqs),
        "facts": [{"id": pk, "sources": list(sources)} for pk, sources in outcome.facts],
    }


def _usage(prepared: Prepared, outcome: Outcome) -> dict[str, int]:
    return usage("x" * (outcome.prompt_chars + len(prepared.request.system)), outcome.text)


def turn_headers(response: R, prepared: Prepared, outcome: Outcome | None = None) -> R:
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


def stream_response(events: Iterator[str] | AsyncIterator[str], prepared: Prepared) -> StreamingHttpResponse:
    return turn_headers(event_stream_response(events), prepared)


def answer_response(prepared: Prepared, *, asgi: bool) -> HttpResponseBase:
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
        return turn_headers(JsonResponse(body), prepared)
    created = int(time.time())
    parts = [
        chunk(
            id=prepared.answer_id,
            model=request.model,
            created=created,
            delta={"role": "assistant", "content": ""},
            with_usage=request.include_usage,
        ),
        chunk(
            id=prepared.answer_id,
            model=request.model,
            created=created,
            delta={"content": prepared.answer},
            with_usage=request.include_usage,
        ),
        chunk(
            id=prepared.answer_id,
            model=request.model,
            created=created,
            delta={},
            finish_reason="stop",
            dellm=prepared.dellm,
            with_usage=request.include_usage,
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
    # The server's own kind of iterator: an ASGI server would otherwise consume a
    # synchronous one in a thread (and warn), a WSGI one buffer an asynchronous one.
    return stream_response(_aiter(parts) if asgi else iter(parts), prepared)


async def _aiter(parts: list[str]) -> AsyncIterator[str]:
    for part in parts:
        yield part


# Waiting for the turn (the kit's wait loop; the view subscribed before it enqueued) --------


def _waiting() -> dict[str, Any]:
    # No read before the first wait: the turn was enqueued after the subscription, so it announces its end.
    return {"timeout": settings.DELLM_SSE_TIMEOUT, "recheck": STATE_CHECK_SECONDS, "read_first": False}


def events_async(prepared: Prepared, pubsub: redis.asyncio.client.PubSub) -> AsyncIterator[str]:
    """The chunks of a streaming completion, under ASGI. A client that goes away cancels only this
    stream: the turn goes on in the worker and commits whole."""
    return watch_async(
        pubsub, Relay(prepared), load=lambda: turn_outcome_briefly(prepared.turn, prepared.owner_id), **_waiting()
    )


async def wait_async(prepared: Prepared, pubsub: redis.asyncio.client.PubSub) -> Outcome | None:
    """The outcome of a non-streaming completion under ASGI; None past DELLM_SSE_TIMEOUT."""
    waiting = Waiting()
    async for _ in watch_async(
        pubsub, waiting, load=lambda: turn_outcome_briefly(prepared.turn, prepared.owner_id), **_waiting()
    ):
        pass
    return waiting.outcome


def events_sync(prepared: Prepared, pubsub: redis.client.PubSub) -> Iterator[str]:
    """`events_async` on the request's thread (WSGI)."""
    return watch_sync(
        pubsub, Relay(prepared), load=lambda: turn_outcome(prepared.turn, prepared.owner_id), **_waiting()
    )


def wait_sync(prepared: Prepared, pubsub: redis.client.PubSub) -> Outcome | None:
    """`wait_async` on the request's thread (WSGI)."""
    waiting = Waiting()
    for _ in watch_sync(pubsub, waiting, load=lambda: turn_outcome(prepared.turn, prepared.owner_id), **_waiting()):
        pass
    return waiting.outcome


def completion_response(prepared: Prepared, outcome: Outcome | None) -> HttpResponse:
    if outcome is None:
        error = CompletionError(
            f"The reply is taking too long; it will still appear in DeLLM (turn {prepared.turn_id}).",
            status=504,
            type="server_error",
            code="timeout",
        )
        return turn_headers(error_response(error), prepared)
    if not outcome.done:
        error = CompletionError(outcome.error, status=502, type="server_error", code="upstream_error")
        return turn_headers(error_response(error), prepared)
    body = completion(
        id=completion_id(prepared.turn_id),
        model=prepared.request.model,
        text=outcome.text,
        dellm=_dellm(prepared, outcome),
        usage=_usage(prepared, outcome),
        tool_calls=list(outcome.tool_calls),
    )
    return turn_headers(JsonResponse(body), prepared, outcome)
