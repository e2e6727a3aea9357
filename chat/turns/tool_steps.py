"""Turns that call the client's tools: the steps of a turn, and the turn that answers after tool results."""

from django.db import transaction

from chat.llm import ToolStep
from chat.models import ContextEdge, Message, Thread, Turn
from chat.turns.start import system_message_store
from chat.writer import (
    Supplied,
    tool_results_store,
)


def turn_tool_steps(*, turn: Turn) -> list[tuple[ToolStep, list[int]]] | None:
    """The tool steps a turn's reply follows, oldest first, each with its results' ids; None if one was removed.

    A turn that answers tool results names the call they answer
    (`Turn.tool_call`); that call is the reply of an earlier turn, which may
    itself answer the results of an earlier call: the model sees them all.
    """
    steps: list[tuple[ToolStep, list[int]]] = []
    call_id = turn.tool_call_id
    seen: set[int] = set()
    while call_id is not None and call_id not in seen:
        seen.add(call_id)
        call = Message.objects.filter(owner_id=turn.owner_id, pk=call_id, status__in=Message.LIVE).first()
        if call is None:
            return None
        results = list(
            Message.objects.filter(
                owner_id=turn.owner_id,
                in_edges__owner_id=turn.owner_id,
                in_edges__source_id=call.pk,
                in_edges__signal=ContextEdge.Signal.TOOL,
            )
            .order_by("seq")
            .values_list("pk", "status", "tool_call_id", "content")
        )
        if not results or any(status not in Message.LIVE for _, status, _, _ in results):
            return None
        step = ToolStep(
            text=call.content,
            calls=list(call.tool_calls or []),
            results=[(tool_call_id, content) for _, _, tool_call_id, content in results],
        )
        steps.insert(0, (step, [pk for pk, _, _, _ in results]))
        call_id = (
            Turn.objects.filter(owner_id=turn.owner_id, reply_id=call.pk).values_list("tool_call_id", flat=True).first()
        )
    return steps


def tool_results_turn_create(
    *, call: Message, results: list[Supplied], question_id: int, policy: str, system: str = ""
) -> Turn:
    """Store a client's results for the tool calls of reply `call` and a pending turn to answer them.

    In one transaction: the system prompt (as `turn_create`), the results
    (`chat.writer.tool_results_store`: each derives from the call; none if
    `results` is empty, when they are stored already), then the turn: it
    answers `question_id` (the user message the call's turn answered) after
    the call's results (`Turn.tool_call`). Not enqueued (the endpoint enqueues
    it once it listens). Raises SourcesRemoved if the call is no longer live.
    """
    with transaction.atomic():
        system_message = (
            system_message_store(thread=Thread.objects.get(owner_id=call.owner_id, pk=call.thread_id), text=system)
            if system.strip()
            else None
        )
        if results:
            tool_results_store(owner_id=call.owner_id, call_id=call.pk, results=results)
        return Turn.objects.create(
            owner_id=call.owner_id,
            user_message_id=question_id,
            policy=policy,
            system_message=system_message,
            tool_call=call,
        )
