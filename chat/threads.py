"""Threads: create and rename (a title is the user's own words; a derived one is chat/titles.py's)."""

from django.contrib.auth.models import User

from chat.models import Thread
from core.errors import NotFound, ValidationFailed

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
    # The user's own words now: no sources, so no deletion or undo draws it again (chat/titles.py).
    thread.title = title
    thread.title_sources = []
    thread.save(update_fields=["title", "title_sources", "updated_at"])
    return thread


# --- Agents' writes (MCP, assistant/mcp/tools.py) ---------------------------------

# The thread an owner's agent notes are stored in (one per owner, made on the first note).
NOTES_SOURCE = "mcp"
NOTES_SOURCE_ID = "notes"
NOTES_TITLE = "Agent notes"
