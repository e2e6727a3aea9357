"""What agents do with memory: notes they store, reads they make, and the user's switch for what they may do."""

from chat.models import AgentAccess, ContextEdge, MemoryRead, Message, Thread
from chat.threads import NOTES_SOURCE, NOTES_SOURCE_ID, NOTES_TITLE
from chat.turns.start import validate_content
from chat.writer import (
    Source,
    SourcesRemoved,
    message_store,
)
from chat.writer.vectors import messages_index_embed
from core.errors import NotFound

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
