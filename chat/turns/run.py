"""Running a turn in the worker: retrieve the context, ask the model, commit the reply with its edges."""

import logging
from collections.abc import Callable, Sequence

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from chat.llm import Answer, ContextItem, get_responder
from chat.models import ContextEdge, Message, Turn
from chat.retrieval.context import context_retrieve
from chat.turns.recovery import turn_fail
from chat.turns.tool_offers import turn_tools_get
from chat.turns.tool_steps import turn_tool_steps
from chat.writer import (
    Source,
    SourcesRemoved,
    message_store,
)
from chat.writer.vectors import message_index_embed, messages_index_embed, own_index_vector
from core.db.locks import owner_lock

logger = logging.getLogger(__name__)


class _ContextChanged(Exception):
    pass


class _AlreadyFinished(Exception):
    pass


class _TurnClosed(Exception):
    pass


def _place_of(message_id: int | None, *, owner_id: int) -> int | None:
    """The thread position a rewrite of `message_id` is shown at: where that message was."""
    if message_id is None:
        return None
    row = Message.objects.filter(owner_id=owner_id, pk=message_id).values_list("place", "seq").first()
    return None if row is None else row[0] or row[1]


def _reply_commit(
    *,
    turn: Turn,
    context: list[ContextItem],
    text: str,
    embedding: list[float] | None,
    tool_calls: list[dict[str, str]] | None = None,
    results: Sequence[int] = (),
) -> Message:
    """Commit a reply and its edges only if the whole context is still live.

    Runs under the owner's lock, the same one deletion execution takes, and
    the writer (`chat.writer.message_store`) refuses a reply whose context is
    no longer live: a deletion either finishes before that check (and the
    context is rebuilt) or starts after the reply exists (and its Dep
    includes the reply). That is I1. A reply that calls tools carries its
    `tool_calls`; one written after tool results (`results`: their ids, in
    the order the model saw them) gets a `tool` edge from each. The turn is
    marked done, in its row and on `turn`.
    """
    user_message = turn.user_message
    with transaction.atomic():
        owner_lock(turn.owner_id)
        # Another run of this turn (a redelivered task, the stuck-turn sweep)
        # may have committed first; the owner's lock orders the two. A turn
        # closed otherwise meanwhile (a regeneration cancelled or undone)
        # commits nothing either. One read tells which.
        status = Turn.objects.filter(owner_id=turn.owner_id, pk=turn.pk).values_list("status", flat=True).first()
        if status == Turn.Status.DONE:
            raise _AlreadyFinished
        if status != Turn.Status.RUNNING:
            raise _TurnClosed
        system_id = turn.system_message_id
        try:
            reply = message_store(
                owner_id=turn.owner_id,
                thread_id=user_message.thread_id,
                role=Message.Role.ASSISTANT,
                content=text,
                embedding=embedding,
                sources=[
                    Source(id=user_message.id, rank=0, score=1.0),
                    *(Source(id=c.id, rank=rank, score=c.score, signal=c.signal) for rank, c in enumerate(context, 1)),
                    # The system prompt the model was given, after the retrieved context.
                    *(
                        [Source(id=system_id, rank=len(context) + 1, score=0.0, signal=ContextEdge.Signal.SYSTEM)]
                        if system_id
                        else []
                    ),
                    *(
                        Source(id=result, rank=len(context) + 2 + number, score=1.0, signal=ContextEdge.Signal.TOOL)
                        for number, result in enumerate(results)
                    ),
                ],
                replaces=turn.replaces,
                place=_place_of(turn.replaces, owner_id=turn.owner_id),
                tool_calls=tool_calls or None,
            )
        except SourcesRemoved:
            raise _ContextChanged from None
        done = {"status": Turn.Status.DONE, "reply_id": reply.pk, "error": "", "updated_at": timezone.now()}
        Turn.objects.filter(owner_id=turn.owner_id, pk=turn.pk).update(**done)
    # The reply itself is read when asked for (`turn.reply`): this row in hand has no search vector yet.
    for field, value in done.items():
        setattr(turn, field, value)
    return reply


def turn_run(
    *,
    turn_id: int,
    owner_id: int,
    on_token: Callable[[str], None] | None = None,
    on_rebuild: Callable[[], None] | None = None,
    on_running: Callable[[], None] | None = None,
) -> Turn | None:
    """Generate and commit the reply of a turn.

    Steps: mark running; embed the user message; retrieve the context; call
    the LLM outside any transaction; embed the reply; commit under the owner's
    lock if the context is still live, else rebuild the context and try again
    (at most DELLM_TURN_MAX_REBUILDS times; `on_rebuild` tells a streaming
    client to drop the tokens it was sent). The turn's system prompt, if it
    has one (`Turn.system_message`), is read here and given to the model; like
    the user's message it must be live for the reply to commit.
    Upstream errors propagate to the
    caller (the Celery task decides whether to retry); the turn stays running.
    `on_running` is called once the turn is marked running. A `/v1` turn may
    have the client's tools (`chat.turns.tool_offers`, read on every try) and may
    answer tool results (`Turn.tool_call`: every step must still be live, else
    the turn fails); its reply is then the model's tool calls, or text that
    derives from the results (`_reply_commit`).
    Safe to run twice: a turn that is already done is returned unchanged, and
    of two runs racing (a redelivered task, the sweep) only one reply commits.
    """
    turns = Turn.objects.filter(owner_id=owner_id, pk=turn_id)
    updated = turns.filter(status__in=[Turn.Status.PENDING, Turn.Status.RUNNING]).update(
        status=Turn.Status.RUNNING, attempts=F("attempts") + 1, updated_at=timezone.now()
    )
    turn = turns.select_related("user_message").filter(user_message__owner_id=owner_id).first()
    if turn is None or not updated:
        return turn
    if on_running is not None:
        on_running()
    responder = get_responder()
    message: Message | None = turn.user_message
    for attempt in range(settings.DELLM_TURN_MAX_REBUILDS):
        if attempt:
            # Read again: the context changed, and the question may have gone with it.
            message = Message.objects.filter(owner_id=owner_id, pk=turn.user_message_id).first()
        message = None if message is None else message_index_embed(message)
        if message is None or not message.is_live:
            return turn_fail(
                turn_id=turn.pk, owner_id=owner_id, error="Your message was deleted before the reply was ready."
            )
        turn.user_message = message
        # Read again on every try: a prompt removed meanwhile fails the turn
        # (it would be removed again with the reply), as a removed question does.
        # Only a /v1 turn has one; other turns call the responder exactly as before.
        instructions: dict[str, str] = {}
        if turn.system_message_id is not None:
            system = Message.objects.filter(
                owner_id=owner_id, pk=turn.system_message_id, status__in=Message.LIVE
            ).first()
            if system is None:
                return turn_fail(
                    turn_id=turn.pk,
                    owner_id=owner_id,
                    error="The system prompt was deleted before the reply was ready.",
                )
            instructions = {"system": system.content}
        steps = turn_tool_steps(turn=turn)
        if steps is None:
            return turn_fail(
                turn_id=turn.pk,
                owner_id=owner_id,
                error="A tool call or its result was deleted before the reply was ready.",
            )
        context = context_retrieve(
            message=message,
            policy=turn.policy,
            k=settings.DELLM_CONTEXT_K,
            threshold=settings.DELLM_CONTEXT_THRESHOLD,
            window=settings.DELLM_CONTEXT_WINDOW,
        )
        offer = turn_tools_get(turn_id=turn.pk) if _tools_possible(turn) else None
        if offer is None and not steps:
            if on_token is None:
                answer = Answer(text=responder.complete(context=context, user_message=message.content, **instructions))
            else:
                parts = []
                for token in responder.stream(context=context, user_message=message.content, **instructions):
                    parts.append(token)
                    on_token(token)
                answer = Answer(text="".join(parts))
        else:
            answer = responder.answer(
                context=context,
                user_message=message.content,
                offer=offer,
                steps=[step for step, _ in steps],
                on_token=on_token,
                **instructions,
            )
        text = answer.text
        if not text.strip() and not answer.tool_calls:
            text = "(The model returned an empty reply.)"
        try:
            reply = _reply_commit(
                turn=turn,
                context=context,
                text=text,
                # Its index vector, outside the lock; where that needs the question's
                # words it is embedded once committed (below). A tool call never is.
                embedding=None if answer.tool_calls else own_index_vector(text),
                tool_calls=answer.tool_calls,
                results=[pk for _, ids in steps for pk in ids],
            )
        except _AlreadyFinished:
            logger.info("turn %s: finished by another run; this reply is dropped", turn.pk)
            return turns.first()
        except _TurnClosed:
            logger.info("turn %s: closed during generation, reply discarded", turn.pk)
            turn.refresh_from_db()
            return turn
        except _ContextChanged:
            logger.info("turn %s: context changed during generation, rebuilding", turn.pk)
            if on_rebuild is not None:
                on_rebuild()
            continue
        if reply.embedding is None and not reply.tool_calls:
            # Its index text holds the question it answers (chat/index/context.py); a tool call is not memory.
            messages_index_embed(owner_id=owner_id, ids=[reply.pk])
        return turn
    return turn_fail(
        turn_id=turn.pk, owner_id=owner_id, error="Memory kept changing while the reply was generated; please retry."
    )


def _tools_possible(turn: Turn) -> bool:
    """Only a `/v1` turn can have been offered tools: a regeneration turn never is (it is deleted instead)."""
    return turn.replaces is None and turn.deletion_id is None
