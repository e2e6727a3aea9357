"""Plain JSONL: one message per line, conversations in order of first appearance.

Each line is a JSON object:

    {"conversation": "trip-2024", "role": "user", "content": "Where should I stay?",
     "created_at": "2024-05-01T12:00:00Z", "id": "m1", "title": "Trip"}

`conversation` (string or whole number), `role` (`user` or `assistant`) and
`content` (string) are required. `created_at` (ISO-8601 or epoch seconds),
`id` (the message's id, unique within its conversation) and `title` (taken
from the conversation's first line that has one) are optional. Without `id`, a
message is known by its position in its conversation (`#1`, `#2`, ...), so
lines appended to a conversation import as new messages, while lines inserted
in the middle would shift the positions: give ids if you edit files. Blank
lines are ignored.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from chat.imports.formats.base import (
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
from chat.imports.formats.schema import KEEP, Obj, Skipped

FORMAT = "jsonl"
ROLES = ("user", "assistant")
# The fields of a line that are read; the others are dropped as each line is read.
FIELDS = ("conversation", "role", "content", "created_at", "id", "title")
# A one-line file is also a JSON object: what telling it from DeLLM's export reads.
LINE = Obj(dict.fromkeys(FIELDS, KEEP))


def max_line_bytes(limits: Limits) -> int:
    """A line with the longest message, every character escaped (a surrogate pair: 12 bytes), and its other fields."""
    return 12 * limits.max_message_chars + 1024 * 1024


@dataclass
class _Lines:
    key: str
    lines: list[tuple[int, Any]] = field(default_factory=list)
    broken: ConversationInvalid | None = None


def _row(line: str) -> Any:
    """The line's JSON; of an object only FIELDS, a container among them as `Skipped` (ValueError if not JSON)."""
    try:
        row = json.loads(line)
    except RecursionError:
        raise ValueError("too deep") from None
    if isinstance(row, dict):
        row = {
            key: Skipped("object" if isinstance(row[key], dict) else "list", not row[key])
            if isinstance(row[key], (dict, list))
            else row[key]
            for key in FIELDS
            if key in row
        }
    return row


def looks_like(lines: Iterable[str]) -> bool:
    for line in lines:
        if line.strip():
            try:
                first = _row(line)
            except ValueError:
                return False
            return isinstance(first, dict) and "conversation" in first and "role" in first
    return False


def parse(lines: Iterable[str], limits: Limits) -> ParseResult:
    """The lines (as `str.splitlines` gives them, numbered from 1) grouped into conversations."""
    groups: dict[str, _Lines] = {}
    rows = 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        rows += 1
        # Each line is one message: the count bounds what is held before the conversations are grouped.
        if rows > limits.max_messages:
            raise ImportFormatError(
                f"The file has more than {limits.max_messages} messages; split it.", field="messages"
            )
        try:
            row = _row(line)
        except ValueError:
            raise ImportFormatError(f"Line {number} is not JSON.", field=f"line {number}") from None
        if not isinstance(row, dict):
            raise ImportFormatError(f"Line {number} is not a JSON object.", field=f"line {number}")
        try:
            key = source_key(row.get("conversation"), f"line {number}.conversation")
        except ConversationInvalid as exc:
            raise ImportFormatError(f"Line {number}: conversation {exc.message}.", field=exc.field) from None
        group = groups.setdefault(key, _Lines(key=key))
        group.lines.append((number, row))
    return collect(FORMAT, list(groups.values()), _conversation, limits, id_of=lambda group: group.key)


def _conversation(group: _Lines, limits: Limits) -> Conversation:
    messages: list[ImportedMessage] = []
    title = ""
    seen: set[str] = set()
    for position, (number, row) in enumerate(group.lines, 1):
        where = f"line {number}"
        if row.get("role") not in ROLES:
            raise ConversationInvalid(f"{where}.role", "must be user or assistant")
        content = row.get("content")
        if not isinstance(content, str):
            raise ConversationInvalid(f"{where}.content", "is missing or not a string")
        message_id = source_key(row["id"], f"{where}.id") if row.get("id") is not None else f"#{position}"
        if message_id in seen:
            raise ConversationInvalid(f"{where}.id", "appears twice in this conversation")
        seen.add(message_id)
        if not title and isinstance(row.get("title"), str):
            title = row["title"].strip()
        if not content.strip():
            continue
        messages.append(
            ImportedMessage(
                source_id=message_id,
                role=row["role"],
                text=check_text(content.strip(), f"{where}.content", limits),
                created_at=iso_datetime(row.get("created_at"), f"{where}.created_at"),
            )
        )
    check_message_count(len(messages), limits)
    return Conversation(
        source_id=group.key,
        title=title,
        created_at=messages[0].created_at if messages else None,
        messages=messages,
    )
