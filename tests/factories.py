"""Test data, built through the same models the services write."""

import itertools

import numpy as np
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Max

from chat.index.embeddings import embed_one
from chat.models import ContextEdge, Message, Thread
from chat.writer import Source, Supplied, indexes_refresh, message_store, tool_results_store

_names = itertools.count(1)


def make_user(username: str | None = None, **extra):
    return get_user_model().objects.create_user(
        username=username or f"user{next(_names)}", password="pw-for-tests", **extra
    )


def make_thread(owner, title: str = "") -> Thread:
    return Thread.objects.create(owner=owner, title=title)


def make_message(thread: Thread, content: str = "", role: str = "user", embedding=None, **extra) -> Message:
    seq = (Message.objects.filter(owner_id=thread.owner_id).aggregate(m=Max("seq"))["m"] or 0) + 1
    message = Message.objects.create(
        owner_id=thread.owner_id,
        thread=thread,
        seq=seq,
        role=role,
        content=content or f"message {seq}",
        embedding=embedding,
        # A vector records the model that made it, as the services do: deletion
        # selection and retrieval compare only vectors of the configured model.
        **({"embedding_model": settings.DELLM_EMBEDDING_MODEL} if embedding is not None else {}) | extra,
    )
    # Its index (search vector, sources) as the writer sets it; the given vector is kept.
    indexes_refresh(owner_id=message.owner_id, ids=[message.pk], fresh=[message.pk])
    message.refresh_from_db(fields=["search", "index_sources"])
    return message


def make_edge(source: Message, target: Message, rank: int = 1, score: float = 0.5) -> ContextEdge:
    return ContextEdge.objects.create(owner_id=source.owner_id, source=source, target=target, rank=rank, score=score)


def make_long_thread(owner, messages: int, width: int, imported_from: str = "chatgpt") -> tuple[Thread, dict[int, int]]:
    """A conversation of `messages` alternating user and assistant messages, each in the context of the
    next `width` (rank = distance): a dense import. Returns the thread and {seq: id}."""
    thread = make_thread(owner, "A long conversation")
    Message.objects.bulk_create(
        Message(
            owner=owner,
            thread=thread,
            seq=seq,
            role="user" if seq % 2 else "assistant",
            content=f"Message number {seq} of a long imported conversation.",
            imported_from=imported_from,
        )
        for seq in range(1, messages + 1)
    )
    table = Message._meta.db_table
    with connection.cursor() as cursor:
        # Both ends are this thread's rows, so the foreign keys hold by construction: without their per-row
        # triggers (replica role, for this insert only), which the end of the test would otherwise fire,
        # one for each of the edges' keys, when its constraints are checked.
        cursor.execute("SET LOCAL session_replication_role = replica")
        cursor.execute(
            f"""INSERT INTO {ContextEdge._meta.db_table} (owner_id, source_id, target_id, rank, score, signal)
            SELECT t.owner_id, s.id, t.id, t.seq - s.seq, 0.5, 'transcript'
            FROM {table} t JOIN {table} s ON s.thread_id = t.thread_id AND s.seq BETWEEN t.seq - %s AND t.seq - 1
            WHERE t.thread_id = %s""",
            [width, thread.pk],
        )
        cursor.execute("SET LOCAL session_replication_role = DEFAULT")
    ids = dict(Message.objects.filter(thread=thread).values_list("seq", "pk"))
    indexes_refresh(owner_id=owner.pk, ids=ids.values(), fresh=ids.values())
    return thread, ids


def unit_vector(seed: int, dim: int = 256) -> list[float]:
    vector = np.random.default_rng(seed).standard_normal(dim)
    return (vector / np.linalg.norm(vector)).tolist()


# The admin's `history` (tests/conftest.py): purged there, so no admin page may show it.
SECRET_WORD = "Zanzibar-4471"
SECRET = f"my tortoise is called {SECRET_WORD}"
KEPT = "I like jasmine tea"


def make_tool_steps(thread: Thread, *, question: str, arguments: str, result: str, answer: str) -> dict[str, Message]:
    """A question, the model's tool call, the client's result and the answer that used it, as `/v1` stores them.

    Through the writer (rule 3: the result derives from the call, the answer
    from the result and the question), so the tool steps get their index as
    any message does and, as at the `/v1` door, no vector; the question and
    the answer are embedded.
    """
    owner_id = thread.owner_id
    asked = message_store(
        owner_id=owner_id, thread_id=thread.pk, role="user", content=question, embedding=embed_one(question)
    )
    call = message_store(
        owner_id=owner_id,
        thread_id=thread.pk,
        role="assistant",
        content="",
        sources=[Source(id=asked.pk)],
        tool_calls=[{"id": "call_1", "name": "lookup", "arguments": arguments}],
    )
    (tool_result,) = tool_results_store(
        owner_id=owner_id, call_id=call.pk, results=[Supplied(role="tool", content=result, tool_call_id="call_1")]
    )
    answered = message_store(
        owner_id=owner_id,
        thread_id=thread.pk,
        role="assistant",
        content=answer,
        embedding=embed_one(answer),
        sources=[Source(id=asked.pk), Source(id=tool_result.pk, rank=1, score=1.0, signal="tool")],
    )
    return {"question": asked, "call": call, "result": tool_result, "answer": answered}
