"""DeLLM's own export (`GET /api/export/`): threads, messages, edges, deletions.

Each thread becomes a conversation with its messages in `seq` order, and the
export's edges are kept with their rank, score and signal (mapped to the new
ids on import), so provenance survives the round trip. Messages are keyed
`<username>:<id>` and threads `<username>:thread:<id>`, so exports of two
accounts never collide; each message keeps its exported id and thread id
too, so an export re-imported into the account it came from is matched to
that account's own rows (`chat.imports.history`). Deletions are ids and counts only
and are not imported.

Checked here, per export: ids are whole numbers and message ids unique; an
edge's score is a finite number (stored as float8), its rank a whole number
from 0 to 32767 (a smallint), its signal one of `ContextEdge.Signal`'s or
empty; a `system` message (a `/v1` client's system prompt) derives from
nothing, so no edge may point at one. Tool steps (`/v1`, docs/OPENAI.md): an
assistant reply's `tool_calls` is 1 to 128 calls, each an id of 1 to 200
characters (unique in the reply), a function name as `/v1` takes it and its
arguments as text (at most the message limit in all, no NUL); a `tool`
message (a client's result) names in `tool_call_id` (1 to 200 characters)
a call of a reply with a `tool` edge to it, as `/v1` stores it. Only these two
may have empty content; no other message has either field. What the edges leave out is decided on
import: a reply with no edge into it derives from everything before it in its
thread (`chat.writer.graph_store`).

A fact (role `fact`) is never imported: it is derived, and the importing
account draws its own from the imported user messages (the import job ends
with an extraction pass, chat/imports/tasks.py). Facts and every edge into or
out of one are skipped and counted (`ParseResult.facts_skipped`,
`fact_edges_skipped`); the facts thread, left empty, is no conversation.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from chat.imports.formats.base import (
    DERIVED_ROLES,
    ROLES,
    Conversation,
    ConversationError,
    ConversationInvalid,
    ImportedEdge,
    ImportedMessage,
    ImportFormatError,
    Limits,
    ParseResult,
    check_message_count,
    check_text,
    iso_datetime,
)
from chat.imports.formats.schema import KEEP, SKIP, Arr, Capped, CappedReducer, Obj
from chat.models import MAX_TOOL_CALL_ID, MAX_TOOL_CALLS, TOOL_NAME, ContextEdge

FORMAT = "dellm"
# ContextEdge.rank is a smallint; ids are bigints.
MAX_RANK = 32767
MAX_ID = 2**63 - 1
# A `fact` edge joins a fact to its source: skipped with the fact, never imported.
SIGNALS = frozenset(ContextEdge.Signal.values) - {ContextEdge.Signal.FACT} | {""}


class RawEdge(NamedTuple):
    """An edge as the file gives it (`edges` is held until the file is read: a tuple, not a dict, each)."""

    source: Any
    target: Any
    rank: Any
    score: Any
    signal: Any


_EDGE = Obj({"source": KEEP, "target": KEEP, "rank": KEEP, "score": KEEP, "signal": KEEP})


class _Edges:
    def __init__(self, limit: int) -> None:
        self.item: Any = _EDGE
        self.limit = limit
        self.out = Capped()

    def add(self, edge: Any) -> None:
        self.out.total += 1
        if self.out.total > self.limit:
            self.item = SKIP
            return
        if isinstance(edge, dict):
            edge = RawEdge(
                edge.get("source"),
                edge.get("target"),
                edge.get("rank", 0),
                edge.get("score", 0.0),
                edge.get("signal", ""),
            )
        self.out.append(edge)

    def finish(self) -> Capped:
        return self.out


def schema(limits: Limits) -> Obj:
    """What parse reads of the export (with `threads`, `messages` and `edges` counted past their limits)."""
    thread = Obj({"id": KEEP, "title": KEEP, "created_at": KEEP})
    call = Obj({"id": KEEP, "name": KEEP, "arguments": KEEP})
    message = Obj(
        {
            "id": KEEP,
            "thread": KEEP,
            "role": KEEP,
            "content": KEEP,
            "seq": KEEP,
            "created_at": KEEP,
            "said_at": KEEP,
            "tool_calls": Arr(reducer=lambda: CappedReducer(call, MAX_TOOL_CALLS)),
            "tool_call_id": KEEP,
        }
    )
    return Obj(
        {
            "username": KEEP,
            "threads": Arr(reducer=lambda: CappedReducer(thread, limits.max_conversations)),
            "messages": Arr(reducer=lambda: CappedReducer(message, limits.max_messages)),
            "edges": Arr(reducer=lambda: _Edges(limits.max_edges)),
        }
    )


def _count(items: list[Any]) -> int:
    return items.total if isinstance(items, Capped) else len(items)


def looks_like(document: Any) -> bool:
    return isinstance(document, dict) and {"threads", "messages", "edges"} <= document.keys()


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConversationInvalid(where, "is not a whole number")
    return value


def _score(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConversationInvalid(where, "is not a number")
    try:
        score = float(value)
    except OverflowError:
        score = math.inf
    if not math.isfinite(score):
        raise ConversationInvalid(where, "is not a finite number")
    return score


def _rank(value: Any, where: str) -> int:
    rank = _int(value, where)
    if not 0 <= rank <= MAX_RANK:
        raise ConversationInvalid(where, f"must be from 0 to {MAX_RANK}")
    return rank


def _signal(value: Any, where: str) -> str:
    if not isinstance(value, str) or value not in SIGNALS:
        raise ConversationInvalid(where, f"must be one of {', '.join(sorted(SIGNALS - {''}))} or empty")
    return value


def _call_id(value: Any, where: str) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_TOOL_CALL_ID:
        raise ConversationInvalid(where, f"must be a string of 1 to {MAX_TOOL_CALL_ID} characters")
    if "\x00" in value:
        raise ConversationInvalid(where, "holds a NUL character")
    return value


def _tool_calls(value: Any, where: str, limits: Limits) -> tuple[tuple[str, str, str], ...]:
    """An assistant reply's calls as (id, name, arguments); () for none (null, absent)."""
    if value is None:
        return ()
    if not isinstance(value, list) or not value:
        raise ConversationInvalid(where, "must be a non-empty list or null")
    if _count(value) > MAX_TOOL_CALLS:
        raise ConversationInvalid(where, f"has more than {MAX_TOOL_CALLS} calls")
    calls: list[tuple[str, str, str]] = []
    for index, call in enumerate(value):
        at = f"{where}[{index}]"
        if not isinstance(call, dict):
            raise ConversationInvalid(at, "is not an object")
        call_id = _call_id(call.get("id"), f"{at}.id")
        if any(known[0] == call_id for known in calls):
            raise ConversationInvalid(f"{at}.id", "names a call listed before")
        name = call.get("name")
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            raise ConversationInvalid(f"{at}.name", "is not 1 to 64 letters, digits, underscores or dashes")
        arguments = call.get("arguments")
        if not isinstance(arguments, str):
            raise ConversationInvalid(f"{at}.arguments", "is not a string")
        if "\x00" in arguments:
            raise ConversationInvalid(f"{at}.arguments", "holds a NUL character")
        calls.append((call_id, name, arguments))
    if sum(len(arguments) for _, _, arguments in calls) > limits.max_message_chars:
        raise ConversationInvalid(where, f"has arguments of more than {limits.max_message_chars} characters in all")
    return tuple(calls)


def _tool_step(message: dict[str, Any], where: str, limits: Limits) -> tuple[tuple[tuple[str, str, str], ...], str]:
    """A message's (tool_calls, tool_call_id), each only where its role has it."""
    role = message["role"]
    calls = _tool_calls(message.get("tool_calls"), f"{where}.tool_calls", limits)
    if calls and role != "assistant":
        raise ConversationInvalid(f"{where}.tool_calls", "is only an assistant message's")
    if role == "tool":
        return calls, _call_id(message.get("tool_call_id"), f"{where}.tool_call_id")
    if message.get("tool_call_id") not in (None, ""):
        raise ConversationInvalid(f"{where}.tool_call_id", "is only a tool message's")
    return calls, ""


def _exported(value: int) -> int | None:
    """An id that can name a row here (a bigint above 0), or None."""
    return value if 0 < value <= MAX_ID else None


def parse(document: Any, limits: Limits) -> ParseResult:
    if not looks_like(document):
        raise ImportFormatError("A DeLLM export is an object with threads, messages and edges.", field="file")
    username = document.get("username")
    if not isinstance(username, str) or not username or len(username) > 150:
        raise ImportFormatError("The export's username is missing.", field="username")
    threads, messages, edges = document["threads"], document["messages"], document["edges"]
    for name, value in (("threads", threads), ("messages", messages), ("edges", edges)):
        if not isinstance(value, list):
            raise ImportFormatError(f"{name} is not a list.", field=name)
    if _count(threads) > limits.max_conversations:
        raise ImportFormatError(
            f"The file has {_count(threads)} threads; at most {limits.max_conversations} can be imported at once.",
            field="threads",
        )
    if _count(messages) > limits.max_messages:
        raise ImportFormatError(f"The file has more than {limits.max_messages} messages; split it.", field="messages")
    if _count(edges) > limits.max_edges:
        raise ImportFormatError(f"The file has more than {limits.max_edges} edges; split it.", field="edges")
    result = ParseResult(format=FORMAT)
    edges_out: list[ImportedEdge] = []
    # One document is one unit (edges cross threads): any error refuses all of it.
    try:
        by_thread: dict[int, list[tuple[int, ImportedMessage]]] = {}
        titles: dict[int, tuple[str, Any]] = {}
        for index, thread in enumerate(threads):
            if not isinstance(thread, dict):
                raise ConversationInvalid(f"threads[{index}]", "is not an object")
            thread_id = _int(thread.get("id"), f"threads[{index}].id")
            title = thread.get("title") or ""
            if not isinstance(title, str):
                raise ConversationInvalid(f"threads[{index}].title", "is not a string")
            titles[thread_id] = (title, iso_datetime(thread.get("created_at"), f"threads[{index}].created_at"))
            by_thread[thread_id] = []
        # Message id -> key: an edge's keys are these very strings, not a copy per edge.
        known: dict[int, str] = {}
        # The facts' ids: skipped, with every edge into or out of one.
        derived: set[int] = set()
        facts_threads: set[Any] = set()
        prompts: set[str] = set()
        # A reply's call ids, each tool result's (where, call id), and each message's thread (for the results below).
        called: dict[str, set[str]] = {}
        results: dict[str, tuple[str, str]] = {}
        thread_of: dict[str, int] = {}
        for index, message in enumerate(messages):
            where = f"messages[{index}]"
            if not isinstance(message, dict):
                raise ConversationInvalid(where, "is not an object")
            message_id = _int(message.get("id"), f"{where}.id")
            if message.get("role") in DERIVED_ROLES:
                # Drawn again here from the imported messages, never copied (an export older than
                # its thread in `threads` lists it all the same).
                if message_id in known or message_id in derived:
                    raise ConversationInvalid(f"{where}.id", "names a message listed before")
                derived.add(message_id)
                facts_threads.add(message.get("thread"))
                continue
            thread_id = _int(message.get("thread"), f"{where}.thread")
            if thread_id not in by_thread:
                raise ConversationInvalid(f"{where}.thread", "names a thread the export does not have")
            if message.get("role") not in ROLES:
                raise ConversationInvalid(f"{where}.role", "must be user, assistant, summary, system, note or tool")
            calls, call_id = _tool_step(message, where, limits)
            content = message.get("content")
            if not isinstance(content, str):
                raise ConversationInvalid(f"{where}.content", "is missing or not a string")
            if not content.strip() and not calls and message["role"] != "tool":
                raise ConversationInvalid(f"{where}.content", "is empty")
            key = f"{username}:{message_id}"
            if message_id in known or message_id in derived:
                raise ConversationInvalid(f"{where}.id", "names a message listed before")
            known[message_id] = key
            thread_of[key] = thread_id
            if message["role"] == "system":
                prompts.add(key)
            if calls:
                called[key] = {call[0] for call in calls}
            if call_id:
                results[key] = (where, call_id)
            seq = _int(message.get("seq"), f"{where}.seq")
            by_thread[thread_id].append(
                (
                    seq,
                    ImportedMessage(
                        source_id=key,
                        role=message["role"],
                        text=check_text(content, f"{where}.content", limits),
                        created_at=iso_datetime(message.get("created_at"), f"{where}.created_at"),
                        # An export older than `said_at` has `created_at` only.
                        said_at=iso_datetime(message.get("said_at"), f"{where}.said_at"),
                        order=seq,
                        exported_id=_exported(message_id),
                        exported_thread=_exported(thread_id),
                        tool_calls=calls,
                        tool_call_id=call_id,
                    ),
                )
            )
        for index, edge in enumerate(edges):
            where = f"edges[{index}]"
            if not isinstance(edge, RawEdge):
                raise ConversationInvalid(where, "is not an object")
            source_id, target_id = _int(edge.source, f"{where}.source"), _int(edge.target, f"{where}.target")
            if source_id in derived or target_id in derived:
                result.fact_edges_skipped += 1
                continue
            source, target = known.get(source_id), known.get(target_id)
            if source is None or target is None:
                raise ConversationInvalid(where, "joins a message the export does not have")
            if target in prompts:
                raise ConversationInvalid(f"{where}.target", "is a system prompt, which derives from nothing")
            edges_out.append(
                ImportedEdge(
                    source=source,
                    target=target,
                    rank=_rank(edge.rank, f"{where}.rank"),
                    score=_score(edge.score, f"{where}.score"),
                    signal=_signal(edge.signal, f"{where}.signal"),
                )
            )
        # A result a /v1 client supplied with another model's call is a reply
        # written elsewhere (docs/OPENAI.md, "Replays"): its edges are
        # `transcript` ones, and it answers a call of its thread.
        thread_calls: dict[int, set[str]] = {}
        for key, ids in called.items():
            thread_calls.setdefault(thread_of[key], set()).update(ids)
        answered = {
            edge.target
            for edge in edges_out
            if edge.target in results
            and (
                (edge.signal == ContextEdge.Signal.TOOL and results[edge.target][1] in called.get(edge.source, ()))
                or (
                    edge.signal == ContextEdge.Signal.TRANSCRIPT
                    and results[edge.target][1] in thread_calls.get(thread_of[edge.target], ())
                )
            )
        }
        for key, (where, _) in results.items():
            if key not in answered:
                raise ConversationInvalid(
                    f"{where}.tool_call_id", "names no call of a reply with a tool edge to this message"
                )
        for thread_id, rows in by_thread.items():
            if not rows and thread_id in facts_threads:
                continue  # the facts thread: nothing of it is imported
            rows.sort(key=lambda row: row[0])
            check_message_count(len(rows), limits)
            title, created_at = titles[thread_id]
            result.conversations.append(
                Conversation(
                    source_id=f"{username}:thread:{thread_id}",
                    title=title.strip(),
                    created_at=created_at,
                    messages=[message for _, message in rows],
                )
            )
        result.edges = edges_out
        result.facts_skipped = len(derived)
    except ConversationInvalid as exc:
        result.conversations, result.edges = [], []
        result.fact_edges_skipped = 0
        result.errors.append(
            ConversationError(conversation=f"{username} (the whole export)", field=exc.field, message=exc.message)
        )
    return result
