"""ChatGPT's data export: `conversations.json` (a list of conversations).

Each conversation is a tree, `mapping` (node id -> {message, parent,
children}); regenerated replies and edited prompts are sibling branches. The
branch the user last saw ends at `current_node`: walk `parent` links up from
it to the root and reverse. Other branches are ignored. Kept: `user` and
`assistant` messages addressed to everyone, with text parts (`content_type`
`text`, or the string parts of `multimodal_text`). Skipped: the root's null
message, `system` and `tool` messages, hidden ones, tool calls (`recipient`
other than `all`), code/browsing/reasoning content, images, empty text.
"""

from __future__ import annotations

from typing import Any

from chat.imports.formats.base import (
    Conversation,
    ConversationInvalid,
    ImportedMessage,
    ImportFormatError,
    Limits,
    check_message_count,
    check_text,
    epoch_datetime,
    source_key,
)
from chat.imports.formats.schema import KEEP, Arr, Obj, TextPieces, TooMany

FORMAT = "chatgpt"
TEXT_CONTENT_TYPES = ("text", "multimodal_text")
KEPT_ROLES = ("user", "assistant")


# What parse_conversation reads of a conversation; the rest of the file is never built.
_MESSAGE = Obj(
    {
        "id": KEEP,
        "author": Obj({"role": KEEP}),
        "metadata": Obj({"is_visually_hidden_from_conversation": KEEP}),
        "recipient": KEEP,
        "content": Obj({"content_type": KEEP, "parts": Arr(reducer=TextPieces)}),
        "create_time": KEEP,
    }
)
_NODE = Obj({"message": _MESSAGE, "parent": KEEP})


def schema(limits: Limits) -> Obj:
    return Obj(
        {
            "conversation_id": KEEP,
            "id": KEEP,
            "title": KEEP,
            "create_time": KEEP,
            "current_node": KEEP,
            "mapping": Obj(other=_NODE, max_other=limits.max_conversation_nodes),
        }
    )


def looks_like(first: Any) -> bool:
    """Whether the first conversation of a list is ChatGPT's."""
    return isinstance(first, dict) and "mapping" in first


def conversation_id(item: Any) -> str | None:
    if not isinstance(item, dict):
        return None
    value = item.get("conversation_id") or item.get("id")
    return str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else None


def not_a_list() -> ImportFormatError:
    return ImportFormatError("A ChatGPT conversations.json holds a list of conversations.", field="conversations")


def _active_branch(mapping: dict[str, Any], current: str) -> list[tuple[str, Any]]:
    branch: list[tuple[str, Any]] = []
    seen: set[str] = set()
    node_id: Any = current
    while node_id is not None:
        if not isinstance(node_id, str) or node_id not in mapping:
            raise ConversationInvalid(f"mapping.{node_id}", "is referenced as a parent but missing")
        if node_id in seen:
            raise ConversationInvalid(f"mapping.{node_id}.parent", "forms a cycle")
        seen.add(node_id)
        node = mapping[node_id]
        if not isinstance(node, dict):
            raise ConversationInvalid(f"mapping.{node_id}", "is not an object")
        branch.append((node_id, node))
        node_id = node.get("parent")
    branch.reverse()
    return branch


def _text(content: Any, where: str) -> str:
    if not isinstance(content, dict):
        raise ConversationInvalid(where, "is not an object")
    if content.get("content_type") not in TEXT_CONTENT_TYPES:
        return ""
    parts = content.get("parts")
    if not isinstance(parts, list):
        raise ConversationInvalid(f"{where}.parts", "is not a list")
    # Non-string parts are images, audio and other assets: not text to remember.
    return "\n".join(part for part in parts if isinstance(part, str) and part.strip()).strip()


def parse_conversation(item: Any, limits: Limits) -> Conversation:
    if not isinstance(item, dict):
        raise ConversationInvalid("conversation", "is not an object")
    key = source_key(item.get("conversation_id") or item.get("id"), "id")
    title = item.get("title")
    if title is not None and not isinstance(title, str):
        raise ConversationInvalid("title", "is not a string")
    mapping = item.get("mapping")
    if isinstance(mapping, TooMany):
        raise ConversationInvalid("mapping", f"has more than {mapping.limit} nodes")
    if not isinstance(mapping, dict):
        raise ConversationInvalid("mapping", "is missing or not an object")
    current = item.get("current_node")
    if not isinstance(current, str):
        raise ConversationInvalid("current_node", "is missing or not a node id")
    messages: list[ImportedMessage] = []
    for node_id, node in _active_branch(mapping, current):
        message = node.get("message")
        if message is None:
            continue
        where = f"mapping.{node_id}.message"
        if not isinstance(message, dict):
            raise ConversationInvalid(where, "is not an object")
        author = message.get("author")
        if not isinstance(author, dict) or not isinstance(author.get("role"), str):
            raise ConversationInvalid(f"{where}.author.role", "is missing")
        metadata = message.get("metadata") or {}
        if (
            author["role"] not in KEPT_ROLES
            or message.get("recipient", "all") not in ("all", None)
            or (isinstance(metadata, dict) and metadata.get("is_visually_hidden_from_conversation"))
        ):
            continue
        text = _text(message.get("content"), f"{where}.content")
        if not text:
            continue
        messages.append(
            ImportedMessage(
                source_id=source_key(message.get("id") or node_id, f"{where}.id"),
                role=author["role"],
                text=check_text(text, f"{where}.content.parts", limits),
                created_at=epoch_datetime(message.get("create_time"), f"{where}.create_time"),
            )
        )
    check_message_count(len(messages), limits)
    return Conversation(
        source_id=key,
        title=(title or "").strip(),
        created_at=epoch_datetime(item.get("create_time"), "create_time"),
        messages=messages,
    )
