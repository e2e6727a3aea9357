"""Writes to the message store: threads, messages, and chat turns."""

import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from chat.indexing import message_index_embed, messages_index_embed, own_index_vector
from chat.llm import Answer, ContextItem, ToolStep, get_responder
from chat.models import AgentAccess, ContextEdge, ImportJob, ImportUpload, MemoryRead, Message, Thread, Turn
from chat.selectors import context_retrieve
from chat.source_keys import source_key_digest
from chat.tasks import turn_run_task
from chat.turn_tools import turn_tools_get
from chat.writer import (
    Source,
    SourcesRemoved,
    Supplied,
    message_store,
    messages_source_keys_digest,
    tool_results_store,
)
from dellm_site.errors import Conflict, NotFound, ValidationFailed
from dellm_site.locks import owner_lock

logger = logging.getLogger(__name__)

TITLE_MAX = 200


def thread_create(*, owner: User, title: str = "") -> Thread:
    title = (title or "").strip()
    if len(title) > TITLE_MAX:
        raise ValidationFailed(f"A title has at most {TITLE_MAX} characters.", fields={"title": "too long"})
    return Thread.objects.create(owner=owner, title=title)


def thread_rename(*, owner_id: int, thread_id: int, title: str) -> Thread:
    title = (title or "").strip()
    if len(title) > TITLE_MAX:
        raise ValidationFailed(f"A title has at most {TITLE_MAX} characters.", fields={"title": "too long"})
    thread = Thread.objects.filter(owner_id=owner_id, pk=thread_id).first()
    if thread is None:
        raise NotFound(f"No thread with id {thread_id}.")
    thread.title = title
    thread.save(update_fields=["title", "updated_at"])
    return thread


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
            transaction.on_commit(lambda: _enqueue_turn(turn.pk, turn.owner_id))
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


def _enqueue_turn(turn_id: int, owner_id: int) -> None:
    turn_run_task.delay(turn_id=turn_id, owner_id=owner_id)


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
    have the client's tools (`chat.turn_tools`, read on every try) and may
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
            # Its index text holds the question it answers (chat/index_context.py); a tool call is not memory.
            messages_index_embed(owner_id=owner_id, ids=[reply.pk])
        return turn
    return turn_fail(
        turn_id=turn.pk, owner_id=owner_id, error="Memory kept changing while the reply was generated; please retry."
    )


def _tools_possible(turn: Turn) -> bool:
    """Only a `/v1` turn can have been offered tools: a regeneration turn never is (it is deleted instead)."""
    return turn.replaces is None and turn.deletion_id is None


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


def regeneration_turns_create(*, owner_id: int, deletion_id: int, rewrites: list[tuple[int, int, str]]) -> list[int]:
    """Pending turns that rewrite replies: `rewrites` is [(old reply id, user message id, policy)].

    Called inside the deletion's transaction, under the owner's lock; nothing is
    enqueued here (the deletion runs its regenerations in order). Each is an
    ordinary turn: same commit path, events, failure and retry. A rewrite keeps
    the system prompt its reply was written under while that prompt is live
    (read after the deletion's status changes, so a removed prompt is dropped).
    """
    prompts = dict(
        Turn.objects.filter(
            owner_id=owner_id,
            reply_id__in=[reply_id for reply_id, _, _ in rewrites],
            system_message__owner_id=owner_id,
            system_message__status__in=Message.LIVE,
        ).values_list("reply_id", "system_message_id")
    )
    turns = Turn.objects.bulk_create(
        Turn(
            owner_id=owner_id,
            user_message_id=user_id,
            policy=policy,
            replaces=reply_id,
            deletion_id=deletion_id,
            system_message_id=prompts.get(reply_id),
        )
        for reply_id, user_id, policy in rewrites
    )
    return [turn.pk for turn in turns]


def regeneration_turns_close(*, owner_id: int, deletion_id: int, error: str) -> int:
    """Fail the deletion's regeneration turns that have not committed; how many. Caller holds the owner's lock."""
    return Turn.objects.filter(
        owner_id=owner_id, deletion_id=deletion_id, status__in=[Turn.Status.PENDING, Turn.Status.RUNNING]
    ).update(status=Turn.Status.FAILED, error=error, updated_at=timezone.now())


def turn_fail(*, turn_id: int, owner_id: int, error: str) -> Turn | None:
    """Mark a turn failed with a reason for humans (never message text)."""
    turns = Turn.objects.filter(owner_id=owner_id, pk=turn_id)
    turns.exclude(status=Turn.Status.DONE).update(status=Turn.Status.FAILED, error=error, updated_at=timezone.now())
    return turns.first()


def turn_retry(*, turn_id: int, owner_id: int) -> Turn:
    """Put a failed turn back to pending, keeping the user's message."""
    turn = (
        Turn.objects.select_related("user_message")
        .filter(owner_id=owner_id, pk=turn_id, user_message__owner_id=owner_id)
        .first()
    )
    if turn is None:
        raise NotFound(f"No turn with id {turn_id}.")
    if turn.status != Turn.Status.FAILED:
        raise Conflict("Only a failed turn can be retried.")
    if not turn.user_message.is_live:
        raise NotFound("The message of this turn has been deleted.")
    with transaction.atomic():
        Turn.objects.filter(owner_id=owner_id, pk=turn.pk, status=Turn.Status.FAILED).update(
            status=Turn.Status.PENDING, error="", updated_at=timezone.now()
        )
        transaction.on_commit(lambda: _enqueue_turn(turn.pk, turn.owner_id))
    turn.refresh_from_db()
    return turn


def turns_stuck_sweep(*, now: datetime | None = None) -> dict[str, list[int]]:
    """Re-run or fail turns that made no progress for DELLM_TURN_STUCK_AFTER seconds.

    A turn whose task was lost (broker flushed, retries spent on a database
    outage, worker killed twice) would otherwise wait forever. One with fewer
    than DELLM_TURN_MAX_ATTEMPTS attempts goes back to pending and is enqueued
    again; the others fail with a reason, keeping the user's message (they
    can retry). Each change is a conditional UPDATE on the stale row, so a
    turn that moved in the meantime is left alone, and two sweeps do not
    both re-enqueue.
    """
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.DELLM_TURN_STUCK_AFTER)
    # Regeneration turns (Turn.deletion set) are left to their deletion's task,
    # which runs them one at a time, oldest first (acks_late; the user can
    # resume; provenance.regenerations_sweep enqueues it again if it was lost):
    # re-run here, a cancelled regeneration would come back.
    stuck = Turn.objects.filter(
        status__in=[Turn.Status.PENDING, Turn.Status.RUNNING], updated_at__lt=cutoff, deletion_id__isnull=True
    )
    swept: dict[str, list[int]] = {"rerun": [], "failed": []}
    for turn_id, owner_id, attempts in stuck.order_by("pk").values_list("pk", "owner_id", "attempts"):
        row = Turn.objects.filter(
            owner_id=owner_id, pk=turn_id, status__in=[Turn.Status.PENDING, Turn.Status.RUNNING], updated_at__lt=cutoff
        )
        if attempts >= settings.DELLM_TURN_MAX_ATTEMPTS:
            error = f"The reply could not be generated after {attempts} attempts; please retry."
            if row.update(status=Turn.Status.FAILED, error=error, updated_at=now):
                swept["failed"].append(turn_id)
        elif row.update(status=Turn.Status.PENDING, updated_at=now):
            swept["rerun"].append(turn_id)
            _enqueue_turn(turn_id, owner_id)
    return swept


# --- After a purge (called by the eraser, provenance/erasure/) -------------------

# What an imported thread is called once a purge touched it: its title came from the other tool's export.
IMPORTED_TITLE = "Imported conversation"
PURGED_UPLOAD_ERROR = "A purge erased the uploaded file before it was imported; upload it again."


def purged_imports_scrub(*, owner_id: int, message_ids: list[int]) -> dict[str, int]:
    """Leave no text of purged messages in what their import recorded. Caller holds the owner's lock.

    In the purge's transaction, in order: each of `message_ids` that was
    imported gets its `source_id` replaced by the keyed digest
    (chat/source_keys.py; re-importing the file then finds it purged); each
    imported thread holding one of them gets IMPORTED_TITLE and its key's
    digest; the owner's import jobs that imported into those threads lose
    their file name, and every job's errors that name one of those
    conversations get its key's digest and a field cut to its first name; every
    upload the owner has waiting is deleted, and a job not started yet fails
    with PURGED_UPLOAD_ERROR (a running one has its file in memory already and
    matches digests like any import). Returns counts by kind.
    """
    digested = messages_source_keys_digest(owner_id=owner_id, ids=message_ids)
    thread_ids = sorted(
        set(Message.objects.filter(owner_id=owner_id, pk__in=message_ids).values_list("thread_id", flat=True))
    )
    # The agent notes' thread is ours, not an import: its title and key hold no text.
    threads = list(
        Thread.objects.filter(owner_id=owner_id, pk__in=thread_ids).exclude(source="").exclude(source=NOTES_SOURCE)
    )
    keys = {thread.source_id: source_key_digest(owner_id=owner_id, key=thread.source_id) for thread in threads}
    # The jobs that imported into these threads (their file name), and any job
    # that names one of these conversations in its errors (one that failed it
    # never listed its thread), read before the keys become digests.
    named = Q(threads__overlap=[t.pk for t in threads])
    for key in keys:
        named |= Q(errors__contains=[{"conversation": key}])
    jobs = list(ImportJob.objects.filter(named, owner_id=owner_id)) if threads else []
    for thread in threads:
        Thread.objects.filter(owner_id=owner_id, pk=thread.pk).update(
            title=IMPORTED_TITLE, source_id=keys[thread.source_id]
        )
    for job in jobs:
        # A purged conversation's error keeps our sentence; its key becomes the
        # digest and its field loses everything past the first name (a message key).
        errors = [
            {**error, "conversation": keys[error["conversation"]], "field": str(error.get("field") or "").split(".")[0]}
            if error.get("conversation") in keys
            else error
            for error in job.errors
        ]
        update: dict[str, object] = {"errors": errors}
        if set(job.threads) & {t.pk for t in threads}:
            update["filename"] = ""
        ImportJob.objects.filter(pk=job.pk).update(**update)
    uploads, _ = ImportUpload.objects.filter(job__owner_id=owner_id).delete()
    ImportJob.objects.filter(owner_id=owner_id, status=ImportJob.Status.PENDING).update(
        status=ImportJob.Status.FAILED, error=PURGED_UPLOAD_ERROR, finished_at=timezone.now()
    )
    return {"messages": digested, "threads": len(threads), "jobs": len(jobs), "uploads": uploads}


# --- Agents' writes (MCP, assistant/agents.py) ---------------------------------

# The thread an owner's agent notes are stored in (one per owner, made on the first note).
NOTES_SOURCE = "mcp"
NOTES_SOURCE_ID = "notes"
NOTES_TITLE = "Agent notes"
# A client's name as recorded in the read log: its own label, capped.
CLIENT_NAME_MAX = 100


def notes_thread(*, owner_id: int) -> Thread:
    """The owner's "Agent notes" thread, created the first time (its source marks it, like an import's)."""
    thread, _ = Thread.objects.get_or_create(
        owner_id=owner_id, source=NOTES_SOURCE, source_id=NOTES_SOURCE_ID, defaults={"title": NOTES_TITLE}
    )
    return thread


def note_store(*, owner_id: int, text: str, derived_from: list[int]) -> Message:
    """Store an agent's note (role `note`) with an `agent` edge from each memory the agent says it used.

    Through the writer's `message_store`, so its rule holds: refused with
    `NotFound` (nothing written) if any of `derived_from` is not a live
    message of the owner, whether another owner's, missing or removed, so
    an id's existence is never revealed. Embedded after the owner's lock
    is released (the model call must not hold up replies and deletions),
    before it returns, so the note is retrievable at once, like a user's
    message. Purging any source removes the note (it is in that source's Dep).
    """
    validate_content(text)
    thread = notes_thread(owner_id=owner_id)
    sources = [
        Source(id=pk, rank=rank, score=0.0, signal=ContextEdge.Signal.AGENT)
        for rank, pk in enumerate(dict.fromkeys(derived_from), start=1)
    ]
    try:
        note = message_store(
            owner_id=owner_id, thread_id=thread.pk, role=Message.Role.NOTE, content=text, sources=sources
        )
    except SourcesRemoved as refused:
        raise NotFound(f"No memory with id {refused.ids[0]}.", fields={"derived_from": str(refused.ids[0])}) from None
    messages_index_embed(owner_id=owner_id, ids=[note.pk])
    note.refresh_from_db(fields=["embedding", "embedding_model"])
    return note


def memory_read_record(*, owner_id: int, client: str, tool: str, message_ids: list[int]) -> MemoryRead | None:
    """Log, content-free, that an MCP client was shown these memories (nothing when it was shown none)."""
    if not message_ids:
        return None
    name = "".join(ch for ch in client if ch.isprintable())[:CLIENT_NAME_MAX] or "unknown"
    return MemoryRead.objects.create(owner_id=owner_id, client=name, tool=tool, message_ids=sorted(set(message_ids)))


def agent_access_get(*, owner_id: int) -> AgentAccess:
    """The owner's agent settings (the defaults when never set; nothing is written)."""
    return AgentAccess.objects.filter(owner_id=owner_id).first() or AgentAccess(owner_id=owner_id)


def agent_access_set(*, owner_id: int, may_confirm_deletions: bool) -> AgentAccess:
    access, _ = AgentAccess.objects.update_or_create(
        owner_id=owner_id, defaults={"may_confirm_deletions": may_confirm_deletions}
    )
    return access
