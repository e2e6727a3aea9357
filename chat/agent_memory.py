"""What agents do with memory: notes they store, reads they make, and the user's switch for what they may do."""

import re
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from chat.models import AgentAccess, ContextEdge, MemoryRead, Message, Thread
from chat.threads import NOTES_SOURCE, NOTES_SOURCE_ID, NOTES_TITLE
from chat.turns.start import validate_content
from chat.writer import (
    Source,
    SourcesRemoved,
    message_store,
)
from chat.writer.vectors import messages_index_embed
from core.errors import Conflict, NotFound

# A client's name as recorded in the read log and copied into receipts: a product label ("Claude Desktop",
# "mcp-inspector"), not free text. The name is the client's own choice and outlives every purge, so it keeps
# only letters, digits, spaces and `._-`, at most CLIENT_NAME_MAX of them.
CLIENT_NAME_MAX = 40
_NOT_IN_A_LABEL = re.compile(r"[^A-Za-z0-9._ -]+")


def client_label(name: str) -> str:
    """`name` as the read log keeps it: the label's characters, single-spaced, capped; "unknown" if none is left."""
    return (
        " ".join(_NOT_IN_A_LABEL.sub(" ", name[: CLIENT_NAME_MAX * 4]).split())[:CLIENT_NAME_MAX].strip() or "unknown"
    )


def notes_thread(*, owner_id: int) -> Thread:
    """The owner's "Agent notes" thread, created the first time (its source marks it, like an import's)."""
    thread, _ = Thread.objects.get_or_create(
        owner_id=owner_id, source=NOTES_SOURCE, source_id=NOTES_SOURCE_ID, defaults={"title": NOTES_TITLE}
    )
    return thread


def memories_shown(*, owner_id: int, since: datetime) -> list[int]:
    """The memories any MCP client of the owner was shown since `since` (the read log), ascending."""
    reads = MemoryRead.objects.filter(owner_id=owner_id, read_at__gte=since).values_list("message_ids", flat=True)
    return sorted({pk for ids in reads for pk in ids})


def note_store(*, owner_id: int, text: str, derived_from: list[int]) -> Message:
    """Store an agent's note (role `note`): an `agent` edge from each memory the agent says it used, and a
    `read` edge from every other memory an agent of this user was shown in the last DELLM_NOTE_READ_WINDOW.

    What an agent read may be in what it writes, whether it says so or not, so a note derives from both
    (the read log is by user, not by the client's self-given name, which a client chooses). Through the
    writer's `message_store`, so its rule holds: refused, nothing written, if any source is not a live
    message of the owner: `NotFound` for a declared one (another owner's, missing or removed alike, so
    an id's existence is never revealed), `Conflict` for a memory shown and removed since (a note now could
    bring its words back). Embedded after the owner's lock is released (the model call must not hold up
    replies and deletions), before it returns, so the note is retrievable at once, like a user's message.
    Purging any source removes the note (it is in that source's Dep).
    """
    validate_content(text)
    thread = notes_thread(owner_id=owner_id)
    declared = list(dict.fromkeys(derived_from))
    shown = memories_shown(owner_id=owner_id, since=timezone.now() - settings.DELLM_NOTE_READ_WINDOW)
    sources = [
        Source(id=pk, rank=rank, score=0.0, signal=ContextEdge.Signal.AGENT)
        for rank, pk in enumerate(declared, start=1)
    ] + [
        Source(id=pk, rank=rank, score=0.0, signal=ContextEdge.Signal.READ)
        for rank, pk in enumerate((pk for pk in shown if pk not in set(declared)), start=len(declared) + 1)
    ]
    try:
        note = message_store(
            owner_id=owner_id, thread_id=thread.pk, role=Message.Role.NOTE, content=text, sources=sources
        )
    except SourcesRemoved as refused:
        if refused.ids[0] in declared:
            raise NotFound(
                f"No memory with id {refused.ids[0]}.", fields={"derived_from": str(refused.ids[0])}
            ) from None
        raise Conflict(
            "A memory shown to an agent within DELLM_NOTE_READ_WINDOW was deleted since: a note now could bring "
            "its words back. Write the note again once that read is older, or without what it showed.",
            fields={"read": str(refused.ids[0])},
        ) from None
    messages_index_embed(owner_id=owner_id, ids=[note.pk])
    note.refresh_from_db(fields=["embedding", "embedding_model"])
    return note


def memory_read_record(*, owner_id: int, client: str, tool: str, message_ids: list[int]) -> MemoryRead | None:
    """Log, content-free, that an MCP client was shown these memories (nothing when it was shown none)."""
    if not message_ids:
        return None
    return MemoryRead.objects.create(
        owner_id=owner_id, client=client_label(client), tool=tool, message_ids=sorted(set(message_ids))
    )


def agent_access_get(*, owner_id: int) -> AgentAccess:
    """The owner's agent settings (the defaults when never set; nothing is written)."""
    return AgentAccess.objects.filter(owner_id=owner_id).first() or AgentAccess(owner_id=owner_id)


def agent_access_set(*, owner_id: int, may_confirm_deletions: bool) -> AgentAccess:
    access, _ = AgentAccess.objects.update_or_create(
        owner_id=owner_id, defaults={"may_confirm_deletions": may_confirm_deletions}
    )
    return access
