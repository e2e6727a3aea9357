"""Embedding messages' indexes: each message's index vector (`chat.index.context.index_vector`).

The one place a message's vector is computed: a door stores its messages
through the writer (which sets their search vectors and `index_sources`),
then calls `messages_index_embed` for them after its transaction; a deletion
calls it for the indexes its writes recomputed (`chat.writer` dropped their
vectors), as its follow-up. Embedding happens outside every transaction and
lock (a model call must not hold up replies and deletions), and each vector
is stored only if the index it was computed from is still current.
"""

from collections.abc import Iterable

from django.conf import settings
from django.db import connection
from django.db.models.functions import Length

from chat.index.context import TURN_VECTOR_WEIGHT, index_rows, index_vector
from chat.index.embeddings import Embedder, get_embedder
from chat.models import Message
from chat.writer import messages_index_embeddings_set
from core.batches import bounded_batches

# Messages embedded per call of the embedder (and per UPDATE), and at most
# this much of their text: a batch of 256 imported messages of 96,000
# characters was 25 M characters read, embedded and held at once.
EMBED_BATCH = 256
EMBED_CHARS = 1_000_000


def messages_index_embed(
    *,
    owner_id: int,
    ids: Iterable[int],
    missing_only: bool = True,
    embedder: Embedder | None = None,
    model: str | None = None,
) -> int:
    """Embed the index text of the owner's memory messages `ids` (those without a vector, unless `missing_only=False`).

    Batches of EMBED_BATCH messages and EMBED_CHARS characters. Returns how many vectors were stored. A system
    prompt, a tool step or a purged tombstone is never embedded; a
    soft-deleted message is (an undo brings it back with its index whole). `embedder`
    and `model`: the lab's embedder under test (default: the configured one).
    """
    wanted = sorted(set(ids))
    if not wanted:
        return 0
    embedder = embedder or get_embedder()
    model = settings.DELLM_EMBEDDING_MODEL if model is None else model
    memory = (
        Message.objects.filter(owner_id=owner_id, pk__in=wanted, tool_calls__isnull=True)
        .exclude(status=Message.Status.PURGED)
        .exclude(role__in=[Message.Role.SYSTEM, Message.Role.TOOL])
    )
    if missing_only:
        memory = memory.filter(embedding__isnull=True)
    todo = memory.exclude(content="").annotate(chars=Length("content")).order_by("pk").values_list("pk", "chars")
    stored = 0
    for batch in bounded_batches(todo, weigh=lambda row: (1, row[1]), limits=(EMBED_BATCH, EMBED_CHARS)):
        rows = index_rows(owner_id=owner_id, ids=[pk for pk, _ in batch])
        # The previous turns are embedded only when they weigh in the vector.
        turns = [row for row in rows if row.turn] if TURN_VECTOR_WEIGHT else []
        embedded = list(embedder.embed([row.content for row in rows] + [row.turn for row in turns])) if rows else []
        by_turn = dict(zip((row.id for row in turns), embedded[len(rows) :], strict=True))
        vectors = [index_vector(own, by_turn.get(row.id)) for row, own in zip(rows, embedded[: len(rows)], strict=True)]
        stored += messages_index_embeddings_set(
            owner_id=owner_id,
            rows=[(row.id, row.content, row.sources, vector) for row, vector in zip(rows, vectors, strict=True)],
            model=model,
            missing_only=missing_only,
        )
    return stored


def own_index_vector(content: str) -> list[float] | None:
    """The index vector of a memory message about to be stored, where its own words alone decide it; else None.

    That is with TURN_VECTOR_WEIGHT = 0 (`index_vector`), an embedder that
    runs in this process, and no transaction open (embedding is slow: never
    in a transaction, where a door may hold the owner's lock, as `/v1` does
    while it stores a transcript and its turn). A door then stores the
    message with its vector (the writer keeps a vector it is given), and
    saves the read and the write of `messages_index_embed` after its
    transaction. None with a turn weight (the vector needs the previous
    turn, which only the stored row has) and with a remote embedder: a
    turn's reply may yet be refused (its context removed meanwhile), and
    its words must not leave DeLLM before it is known to stay, nor a remote
    failure throw away a finished reply. The door then embeds the stored
    row after its transaction.
    """
    if TURN_VECTOR_WEIGHT or not content or connection.in_atomic_block:
        return None
    embedder = get_embedder()
    if not embedder.local:
        return None
    return embedder.embed([content])[0]


def _memory_unembedded(message: Message) -> bool:
    """`messages_index_embed`'s filter (with `missing_only`), for a row in hand."""
    return (
        message.embedding is None
        and message.tool_calls is None
        and message.status != Message.Status.PURGED
        and message.role not in (Message.Role.SYSTEM, Message.Role.TOOL)
        and message.content != ""
    )


def message_index_embed(message: Message) -> Message | None:
    """Give a loaded message its index vector now if it has none; the message as it now is (None: gone).

    `messages_index_embed` for a row in hand: a turn's question is embedded
    this way before its context is retrieved. With TURN_VECTOR_WEIGHT = 0
    the index vector is the own words' alone (`index_vector`), so the row
    says all: one embedding and one conditional UPDATE, stored only if the
    row's content and index sources are still the loaded ones, and the row
    takes its vector without being read again. If a write came first (or
    with a turn weight, where `messages_index_embed` reads the previous
    turn), the row is read again.
    """
    if not _memory_unembedded(message):
        return message
    if not TURN_VECTOR_WEIGHT:
        model = settings.DELLM_EMBEDDING_MODEL
        vector = get_embedder().embed([message.content])[0]
        if vector is None:
            return message
        rows = [(message.pk, message.content, message.index_sources, vector)]
        if messages_index_embeddings_set(owner_id=message.owner_id, rows=rows, model=model, missing_only=True):
            message.embedding, message.embedding_model = vector, model
            return message
    else:
        messages_index_embed(owner_id=message.owner_id, ids=[message.pk])
    return Message.objects.filter(owner_id=message.owner_id, pk=message.pk).first()
