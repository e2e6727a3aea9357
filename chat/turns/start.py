"""Starting a turn: the user's question stored through the writer, the turn queued (docs/subsystems/turns.md)."""

from django.conf import settings
from django.db import transaction

from chat.models import Message, Thread, Turn
from chat.turns.tasks import turn_run_task
from chat.writer import (
    message_store,
)
from chat.writer.vectors import own_index_vector
from core.db.locks import owner_lock
from core.errors import ValidationFailed


def validate_content(content: object) -> str:
    if not isinstance(content, str) or not content.strip():
        raise ValidationFailed("A message needs some text.", fields={"content": "empty"})
    if len(content) > settings.DELLM_MAX_MESSAGE_CHARS:
        raise ValidationFailed(
            f"A message has at most {settings.DELLM_MAX_MESSAGE_CHARS} characters.", fields={"content": "too long"}
        )
    return content


def message_create(*, thread: Thread, role: str, content: str, embedding: list[float] | None = None) -> Message:
    """Store one message with the owner's next sequence number (`chat.writer.message_store`).

    Side effects: takes the owner's lock for the sequence number; touches the
    thread's `updated_at`.
    """
    validate_content(content)
    if role not in Message.Role.values:
        raise ValidationFailed(f"Unknown role {role!r}.", fields={"role": "unknown"})
    return message_store(owner_id=thread.owner_id, thread_id=thread.pk, role=role, content=content, embedding=embedding)


def turn_create(
    *, thread: Thread, content: str, policy: str | None = None, enqueue: bool = True, system: str = ""
) -> Turn:
    """Store the user's message and a pending turn; enqueue the turn after commit.

    `system` is a client's system prompt (the OpenAI-compatible endpoint): it
    becomes a stored `system` message of the thread, the thread's live one
    with the very same text if there is one, else a new one just before the
    user's message, and the turn records it (`Turn.system_message`). So the
    model sees only stored nodes, and the prompt's edge to the reply makes
    the reply part of its Dep. The task carries the turn id only. With
    `enqueue=False` the caller runs `turn_run` itself (evaluation,
    management commands, the endpoint once it listens).
    """
    policy = policy or settings.DELLM_CONTEXT_POLICY
    if policy not in settings.DELLM_CONTEXT_POLICIES:
        raise ValidationFailed(f"Unknown context policy {policy!r}.", fields={"policy": "unknown"})
    validate_content(content)
    # Stored with its index vector where its own words alone decide it and the
    # embedder runs here (own_index_vector), outside the transaction: the turn
    # then retrieves without writing the question again. Else the turn embeds it.
    embedding = own_index_vector(content)
    with transaction.atomic():
        system_message = system_message_store(thread=thread, text=system) if system.strip() else None
        message = message_create(thread=thread, role=Message.Role.USER, content=content, embedding=embedding)
        turn = Turn.objects.create(
            owner_id=thread.owner_id, user_message=message, policy=policy, system_message=system_message
        )
        if enqueue:
            transaction.on_commit(lambda: turn_enqueue(turn.pk, turn.owner_id))
    return turn


def system_message_store(*, thread: Thread, text: str) -> Message:
    """The thread's live system prompt with exactly `text`, else a new one (never embedded: it is not memory).

    In its own transaction under the owner's lock (the lock lasts as long as
    the transaction), so two requests with a new prompt store it once.
    A removed prompt is not reused: sent again, its text is a new input.
    """
    with transaction.atomic():
        owner_lock(thread.owner_id)
        existing = (
            Message.objects.filter(
                owner_id=thread.owner_id, thread=thread, role=Message.Role.SYSTEM, status__in=Message.LIVE, content=text
            )
            .order_by("-seq")
            .first()
        )
        return existing or message_create(thread=thread, role=Message.Role.SYSTEM, content=text)


def turn_enqueue(turn_id: int, owner_id: int) -> None:
    turn_run_task.delay(turn_id=turn_id, owner_id=owner_id)
