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

from chat.imports.formats.base import (
    Conversation,
    ConversationInvalid,
    ImportedMessage,
    ImportFormatError,
    Limits,
    check_message_count,
    check_text,
    iso_datetime,
    source_key,
)
from chat.imports.formats.schema import KEEP, SKIP, Arr, Capped, CappedReducer, Obj, TextPieces

FORMAT = "claude"
SENDERS = {"human": "user", "assistant": "assistant"}


class Blocks:
    """A message's `content` read as it streams: its non-blank text, or the first block that is wrong."""

    item: Any = Obj({"type": KEEP, "text": KEEP})

    def __init__(self) -> None:
        self.count = 0
        self.texts = TextPieces()
        self.bad: tuple[str, str] | None = None

    def add(self, block: Any) -> None:
        index = self.count
        self.count += 1
        if not isinstance(block, dict):
            self.bad = (f"[{index}]", "is not an object")
        elif block.get("type") == "text":
            if not isinstance(block.get("text"), str):
                self.bad = (f"[{index}].text", "is not a string")
            else:
                self.texts.add(block["text"])
        if self.bad is not None:
            self.item = SKIP

    def finish(self) -> Blocks:
        return self


def schema(limits: Limits) -> Obj:
    message = Obj({"uuid": KEEP, "sender": KEEP, "text": KEEP, "created_at": KEEP, "content": Arr(reducer=Blocks)})
    return Obj(
        {
            "uuid": KEEP,
            "name": KEEP,
            "created_at": KEEP,
            "chat_messages": Arr(reducer=lambda: CappedReducer(message, limits.max_conversation_nodes)),
        }
    )


def looks_like(first: Any) -> bool:
    """Whether the first conversation of a list is Claude's."""
    return isinstance(first, dict) and "chat_messages" in first


def conversation_id(item: Any) -> str | None:
    value = item.get("uuid") if isinstance(item, dict) else None
    return value if isinstance(value, str) else None


def not_a_list() -> ImportFormatError:
    return ImportFormatError("A Claude conversations.json holds a list of conversations.", field="conversations")


def _text(message: dict[str, Any], where: str) -> str:
    content = message.get("content")
    if content is not None:
        if not isinstance(content, Blocks):
            raise ConversationInvalid(f"{where}.content", "is not a list of blocks")
        if content.bad is not None:
            suffix, reason = content.bad
            raise ConversationInvalid(f"{where}.content{suffix}", reason)
        joined = "\n".join(content.texts.finish()).strip()
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
    if isinstance(chat_messages, Capped) and chat_messages.total > limits.max_conversation_nodes:
        raise ConversationInvalid("chat_messages", f"has more than {limits.max_conversation_nodes} messages")
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
