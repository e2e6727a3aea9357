"""What an agent may do with a user's memory: the MCP tools' logic (assistant/mcp/server.py wires them).

Each function is one tool, for one user: validate -> throttle -> one service or
selector -> a JSON-ready answer. Synchronous (the SDK's async handlers run them
on a pool thread), transport-free (the same for streamable HTTP and stdio), and
strict about isolation: every id is looked up within the user's own history, so
another user's id is "not found", exactly like a missing one. Every answer that
shows memories records the read, content-free (ids, the client's name, the
time; `chat.MemoryRead`), so a deletion can say which copies left DeLLM.

Errors are `DomainError`s (JSON-free here; the server turns them into tool
errors `<code>: <message>`); nothing is changed when one is raised.
"""

import json
from typing import Any

from rest_framework.renderers import JSONRenderer
from rest_framework.throttling import SimpleRateThrottle

from chat.agent_memory import agent_access_get, memory_read_record, note_store
from chat.models import INDEX_FIELDS, Fact, Message
from chat.retrieval.context import memory_search
from chat.retrieval.facts import fact_sources, subject_facts, superseded_by
from chat.selectors import message_get
from core.api.client_input import unstorable
from core.errors import DomainError, ValidationFailed
from core.types import User
from provenance.api.serializers.deletions import DeletionSerializer
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.forget_phrases import resolve_deletion_request
from provenance.deletions.preview import deletion_preview
from provenance.dependents import message_dependents

# Size limits of the tools' arguments (a question is short; a note is a message).
MAX_QUERY_CHARS = 2_000
MAX_K = 20
MAX_DERIVED_FROM = 100
MAX_FORGET_IDS = 1_000
FORGET_MODES = ("soft", "purge")

# Why a memory was found, by the signal that passed its floor (chat/retrieval/fused.py).
WHY = {
    "lexical": "same words",
    "vector": "similar meaning",
    "both": "same words and similar meaning",
}
# Why an edge exists, by its signal (chat.models.ContextEdge.Signal).
EDGE_WHY = {
    **WHY,
    "": "the message it answers, or taken by position",
    "transcript": "the conversation before it (a client's or an imported reply)",
    "system": "the system prompt it was written under",
    "agent": "an agent said it used it",
    "read": "an agent was shown it shortly before writing",
    "tool": "the tool call it is the result of, or a tool result it used",
    "fact": "a fact drawn from the user's own words in it",
}


class Throttled(DomainError):
    code = "throttled"
    status = 429


class Refused(DomainError):
    code = "permission_denied"
    status = 403


class AgentThrottle(SimpleRateThrottle):
    """DRF's rate limit for one user and scope, outside a request: the same counters as the API's scopes."""

    def __init__(self, *, scope: str, user_id: int) -> None:
        self.scope = scope
        self.user_id = user_id
        super().__init__()

    def get_cache_key(self, request: Any, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.user_id}


def throttle(*, user: User, scope: str) -> None:
    """Count one call against the user's `scope` rate (settings' DEFAULT_THROTTLE_RATES); refuse past it."""
    limit = AgentThrottle(scope=scope, user_id=user.pk)
    # No request or view here: `get_cache_key` above reads neither.
    if not limit.allow_request(None, None):  # type: ignore[arg-type]
        wait = limit.wait()
        raise Throttled(f"Too many {scope} calls; try again in {max(1, round(wait or 1))} s.")


def _date(message: Message) -> str:
    """When it was said (`Message.said_at`): an imported message's time in its tool, else when DeLLM stored it."""
    return message.said_at.isoformat()


def _whole(value: object, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationFailed(f"{name} must be a whole number from {low} to {high}.", fields={name: "out of range"})
    return value


def _storable(text: str, name: str) -> None:
    problem = unstorable(text)
    if problem is not None:
        raise ValidationFailed(problem, fields={name: "invalid"})


def _ids(value: object, name: str, most: int) -> list[int]:
    if not isinstance(value, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in value):
        raise ValidationFailed(f"{name} must be a list of memory ids.", fields={name: "invalid"})
    if len(value) > most:
        raise ValidationFailed(f"At most {most} ids in {name}.", fields={name: "too many"})
    return value


def search_memory(*, user: User, client: str, query: object, k: object = 5) -> dict[str, Any]:
    """The user's memories DeLLM's retrieval finds for `query`, best first, each with why it was found."""
    if not isinstance(query, str) or not query.strip():
        raise ValidationFailed("query needs some text.", fields={"query": "empty"})
    if len(query) > MAX_QUERY_CHARS:
        raise ValidationFailed(f"query has at most {MAX_QUERY_CHARS} characters.", fields={"query": "too long"})
    _storable(query, "query")
    k = _whole(k, "k", 1, MAX_K)
    throttle(user=user, scope="search")
    found = memory_search(owner_id=user.pk, text=query, k=k)
    facts = [message.pk for _, message in found if message.role == Message.Role.FACT]
    subjects = _subjects(owner_id=user.pk, ids=facts)
    # A fact's words are its sources' words: what was shown is the fact and the live messages it stands for.
    shown = [m.pk for _, m in found] + [pk for item, _ in found for pk in item.sources]
    memory_read_record(owner_id=user.pk, client=client, tool="search_memory", message_ids=shown)
    memories = []
    for item, message in found:
        memory = {
            "id": message.pk,
            "seq": message.seq,
            "role": message.role,
            "thread": message.thread_id,
            "date": _date(message),
            "text": message.content,
            "why": WHY.get(item.signal, item.signal),
            "similarity": round(item.score, 4),
        }
        if message.role == Message.Role.FACT:
            memory |= {"subject": subjects.get(message.pk), "sources": list(item.sources)}
        memories.append(memory)
    return {"memories": memories}


def _subjects(*, owner_id: int, ids: list[int]) -> dict[int, str]:
    """{fact id: its subject} (`chat.subjects.SUBJECTS`' keys)."""
    if not ids:
        return {}
    return dict(Fact.objects.filter(owner_id=owner_id, message_id__in=ids).values_list("message_id", "subject"))


def _fact(*, owner_id: int, message: Message) -> dict[str, Any]:
    """What `explain` adds for a fact: its subject, its live sources, whether it is current (else, by which fact).

    A removed fact tells nobody what it was about: its subject is null."""
    live = message.is_live
    subject = _subjects(owner_id=owner_id, ids=[message.pk]).get(message.pk) if live else None
    newer = superseded_by(subject_facts(owner_id=owner_id, subjects=[subject])) if subject else {}
    return {
        "subject": subject,
        "fact_sources": fact_sources(owner_id=owner_id, ids=[message.pk]).get(message.pk, []),
        # Supersession is computed among live facts (chat/retrieval/facts.py): a removed fact is neither.
        "current": live and message.pk not in newer,
        "superseded_by": newer.get(message.pk),
    }


def explain(*, user: User, client: str, id: object) -> dict[str, Any]:
    """Where memory `id` came from (the messages it derives from) and what was derived from it (its Dep)."""
    message_id = _whole(id, "id", 1, 2**63 - 1)
    throttle(user=user, scope="dependents")
    message = message_get(owner=user, message_id=message_id)
    dependents = message_dependents(owner=user, message_id=message_id)
    sources = (
        Message.objects.filter(owner_id=user.pk)
        .defer(*INDEX_FIELDS)
        .in_bulk([edge.source_id for edge in message.context_edges])
    )
    fact = _fact(owner_id=user.pk, message=message) if message.role == Message.Role.FACT else None
    # A live fact's text is its sources' words: they count as shown with it.
    shown = [message.pk, *(fact["fact_sources"] if fact and message.is_live else [])]
    memory_read_record(owner_id=user.pk, client=client, tool="explain", message_ids=shown)
    answer = {
        "id": message.pk,
        "seq": message.seq,
        "role": message.role,
        "status": message.status,
        "thread": message.thread_id,
        "date": _date(message),
        "text": message.content if message.is_live else "",
        "sources": [
            {
                "id": edge.source_id,
                "role": sources[edge.source_id].role,
                "status": sources[edge.source_id].status,
                "date": _date(sources[edge.source_id]),
                "why": EDGE_WHY.get(edge.signal, edge.signal),
            }
            for edge in message.context_edges
        ],
        "dependents": [
            {"id": d.id, "seq": d.seq, "role": d.role, "status": d.status, "path": d.path} for d in dependents.items
        ],
        "dependent_count": dependents.count,
        "note": "Ids only for sources and dependents: explain them, or search, to read them.",
    }
    if fact is not None:
        answer |= {key: value for key, value in fact.items() if key != "fact_sources"}
    return answer


def remember(*, user: User, client: str, text: object, derived_from: object = None) -> dict[str, Any]:
    """Store a note (role `note`) deriving from the memories the agent says it used; it leaves with them."""
    used = _ids([] if derived_from is None else derived_from, "derived_from", MAX_DERIVED_FROM)
    if not isinstance(text, str):
        raise ValidationFailed("text needs some text.", fields={"text": "empty"})
    _storable(text, "text")
    throttle(user=user, scope="chat")
    note = note_store(owner_id=user.pk, text=text, derived_from=used)
    return {
        "id": note.pk,
        "seq": note.seq,
        "role": note.role,
        "thread": note.thread_id,
        "date": _date(note),
        "derived_from": sorted(set(used)),
    }


def forget(
    *,
    user: User,
    client: str,
    base_url: str,
    request: object = None,
    ids: object = None,
    mode: object = "soft",
    confirm: object = False,
) -> dict[str, Any]:
    """Preview deleting what `request` (a sentence, as in the chat) or `ids` selects, with everything derived.

    Answers the preview (what would go and why, and which memories MCP clients
    read) and the link that opens its confirmation in the web app. With
    `confirm`, confirms it too, only if the user allowed agents to in their
    settings (`chat.AgentAccess`).
    """
    if (request is None) == (ids is None):
        raise ValidationFailed("Give exactly one of request or ids.", fields={"select": "one selector"})
    if mode not in FORGET_MODES:
        raise ValidationFailed("mode is soft or purge.", fields={"mode": "unknown"})
    if not isinstance(confirm, bool):
        raise ValidationFailed("confirm is true or false.", fields={"confirm": "invalid"})
    if confirm and not agent_access_get(owner_id=user.pk).may_confirm_deletions:
        raise Refused(
            "Confirming deletions from an agent is off for this account: open the link in the preview, "
            "or allow it on DeLLM's Deletions page (PUT /api/agent-access/)."
        )
    throttle(user=user, scope="deletion_preview")
    if request is not None:
        if not isinstance(request, str) or len(request) > MAX_QUERY_CHARS:
            raise ValidationFailed(
                f"request is a sentence of at most {MAX_QUERY_CHARS} characters.", fields={"request": "invalid"}
            )
        _storable(request, "request")
        selection = resolve_deletion_request(owner=user, text=request)
        selector: str | None = "request"
    else:
        selection = {"ids": _ids(ids, "ids", MAX_FORGET_IDS)}
        selector = None
    # An agent reads no text through a preview: no redaction proposals (they quote the messages), and
    # words never match a removed message (a match would say what it holds).
    deletion = deletion_preview(
        owner=user,
        actor=user,
        mode=str(mode),
        selector=selector,
        offer_redactions=False,
        removed_by_words=False,
        **selection,
    )
    if confirm:
        throttle(user=user, scope="deletion_action")
        deletion = deletion_confirm(deletion_id=deletion.pk, owner_id=user.pk, confirmed_by=user)
    data = json.loads(JSONRenderer().render(DeletionSerializer(deletion).data))
    return {
        "deletion": data,
        "confirm_url": f"{base_url.rstrip('/')}/?deletion={deletion.pk}",
        "confirmed": bool(confirm),
    }
