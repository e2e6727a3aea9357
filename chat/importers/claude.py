"""Claude's data export: `conversations.json`, a list of conversations.

Each is `{uuid, name, created_at, chat_messages: [...]}` and each message
`{uuid, sender: "human"|"assistant", text, content: [{type, text}, ...],
created_at}`. The text blocks of `content` are preferred (tool calls,
thinking and attachments are other block types); `text` is the fallback for
older exports without `content`. Messages are already in order: Claude's
export holds one branch per conversation.
"""

from __future__ import annotations

from typing import Any

from chat.importers.base import (
    Conversation,
    ConversationInvalid,
    ImportedMessage,
    ImportFormatError,
    Limits,
    ParseResult,
    check_message_count,
    check_text,
    collect,
    iso_datetime,
    source_key,
)

FORMAT = "claude"
SENDERS = {"human": "user", "assistant": "assistant"}


def looks_like(document: Any) -> bool:
    return (
        isinstance(document, list)
        and bool(document)
        and isinstance(document[0], dict)
        and "chat_messages" in document[0]
    )


def conversation_id(item: Any) -> str | None:
    value = item.get("uuid") if isinstance(item, dict) else None
    return value if isinstance(value, str) else None


def parse(document: Any, limits: Limits) -> ParseResult:
    if not isinstance(document, list):
        raise ImportFormatError("A Claude conversations.json holds a list of conversations.", field="conversations")
    return collect(FORMAT, document, parse_conversation, limits, id_of=conversation_id)


def _text(message: dict[str, Any], where: str) -> str:
    content = message.get("content")
    if content is not None:
        if not isinstance(content, list):
            raise ConversationInvalid(f"{where}.content", "is not a list of blocks")
        texts = []
        for index, block in enumerate(content):
            if not isinstance(block, dict):
                raise ConversationInvalid(f"{where}.content[{index}]", "is not an object")
            if block.get("type") == "text":
                if not isinstance(block.get("text"), str):
                    raise ConversationInvalid(f"{where}.content[{index}].text", "is not a string")
                texts.append(block["text"])
        joined = "\n".join(t for t in texts if t.strip()).strip()
        if joined:
            return joined
    text = message.get("text")
    if text is None:
        return ""
    if not isinstance(text, str):
        raise ConversationInvalid(f"{where}.text", "is not a string")
    return text.strip()


def parse_conversation(item: Any, limits: Limits) -> Conversation:
    if not isinstance(item, dict):
        raise ConversationInvalid("conversation", "is not an object")
    key = source_key(item.get("uuid"), "uuid")
    name = item.get("name")
    if name is not None and not isinstance(name, str):
        raise ConversationInvalid("name", "is not a string")
    chat_messages = item.get("chat_messages")
    if not isinstance(chat_messages, list):
        raise ConversationInvalid("chat_messages", "is missing or not a list")
    messages: list[ImportedMessage] = []
    for index, message in enumerate(chat_messages):
        where = f"chat_messages[{index}]"
        if not isinstance(message, dict):
            raise ConversationInvalid(where, "is not an object")
        sender = message.get("sender")
        if sender not in SENDERS:
            raise ConversationInvalid(f"{where}.sender", "must be human or assistant")
        text = _text(message, where)
        if not text:
            continue
        messages.append(
            ImportedMessage(
                source_id=source_key(message.get("uuid"), f"{where}.uuid"),
                role=SENDERS[sender],
                text=check_text(text, f"{where}.content", limits),
                created_at=iso_datetime(message.get("created_at"), f"{where}.created_at"),
            )
        )
    check_message_count(len(messages), limits)
    return Conversation(
        source_id=key,
        title=(name or "").strip(),
        created_at=iso_datetime(item.get("created_at"), "created_at"),
        messages=messages,
    )
