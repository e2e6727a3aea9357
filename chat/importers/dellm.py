"""DeLLM's own export (`GET /api/export/`): threads, messages, edges, deletions.

Each thread becomes a conversation with its messages in `seq` order, and the
export's edges are kept (mapped to the new ids on import), so provenance
survives the round trip. Messages are keyed `<username>:<id>` and threads
`<username>:thread:<id>`, so exports of two accounts never collide. Deletions
are ids and counts only and are not imported.
"""

from __future__ import annotations

from typing import Any

from chat.importers.base import (
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

FORMAT = "dellm"


def looks_like(document: Any) -> bool:
    return isinstance(document, dict) and {"threads", "messages", "edges"} <= document.keys()


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConversationInvalid(where, "is not a whole number")
    return value


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
    if len(threads) > limits.max_conversations:
        raise ImportFormatError(
            f"The file has {len(threads)} threads; at most {limits.max_conversations} can be imported at once.",
            field="threads",
        )
    if len(messages) > limits.max_messages:
        raise ImportFormatError(f"The file has more than {limits.max_messages} messages; split it.", field="messages")
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
        known: set[str] = set()
        for index, message in enumerate(messages):
            where = f"messages[{index}]"
            if not isinstance(message, dict):
                raise ConversationInvalid(where, "is not an object")
            message_id = _int(message.get("id"), f"{where}.id")
            thread_id = _int(message.get("thread"), f"{where}.thread")
            if thread_id not in by_thread:
                raise ConversationInvalid(f"{where}.thread", "names a thread the export does not have")
            if message.get("role") not in ROLES:
                raise ConversationInvalid(f"{where}.role", "must be user, assistant, summary or system")
            content = message.get("content")
            if not isinstance(content, str) or not content.strip():
                raise ConversationInvalid(f"{where}.content", "is missing or empty")
            key = f"{username}:{message_id}"
            known.add(key)
            seq = _int(message.get("seq"), f"{where}.seq")
            by_thread[thread_id].append(
                (
                    seq,
                    ImportedMessage(
                        source_id=key,
                        role=message["role"],
                        text=check_text(content, f"{where}.content", limits),
                        created_at=iso_datetime(message.get("created_at"), f"{where}.created_at"),
                        order=seq,
                    ),
                )
            )
        for index, edge in enumerate(edges):
            where = f"edges[{index}]"
            if not isinstance(edge, dict):
                raise ConversationInvalid(where, "is not an object")
            source = f"{username}:{_int(edge.get('source'), f'{where}.source')}"
            target = f"{username}:{_int(edge.get('target'), f'{where}.target')}"
            if source not in known or target not in known:
                raise ConversationInvalid(where, "joins a message the export does not have")
            score = edge.get("score", 0.0)
            if isinstance(score, bool) or not isinstance(score, (int, float)):
                raise ConversationInvalid(f"{where}.score", "is not a number")
            edges_out.append(
                ImportedEdge(source=source, target=target, rank=_int(edge.get("rank", 0), f"{where}.rank"), score=score)
            )
        for thread_id, rows in by_thread.items():
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
    except ConversationInvalid as exc:
        result.conversations, result.edges = [], []
        result.errors.append(
            ConversationError(conversation=f"{username} (the whole export)", field=exc.field, message=exc.message)
        )
    return result
