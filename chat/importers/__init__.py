"""Parsers of other tools' chat histories into one normalized shape.

`parse_file(data, format=None, limits=...)` reads bytes (a JSON file, a JSONL
file, or a ChatGPT export zip), detects the format unless one is forced, and
returns a `ParseResult`. Pure: no database access.
"""

from __future__ import annotations

import json
from typing import Any

from chat.importers import chatgpt, claude, dellm, jsonl
from chat.importers.archive import ZipLimits, is_zip, read_member
from chat.importers.base import (
    Conversation,
    ConversationError,
    ImportedEdge,
    ImportedMessage,
    ImportFormatError,
    Limits,
    ParseResult,
)

FORMATS = ("chatgpt", "claude", "dellm", "jsonl")

__all__ = [
    "FORMATS",
    "Conversation",
    "ConversationError",
    "ImportFormatError",
    "ImportedEdge",
    "ImportedMessage",
    "Limits",
    "ParseResult",
    "ZipLimits",
    "parse_file",
]

_JSON_PARSERS = {"chatgpt": chatgpt.parse, "claude": claude.parse, "dellm": dellm.parse}


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ImportFormatError("The file is not UTF-8 text, a JSON export or a zip.", field="file") from None


def detect(document: Any) -> str | None:
    for name, module in (("chatgpt", chatgpt), ("claude", claude), ("dellm", dellm)):
        if module.looks_like(document):
            return name
    return None


def parse_file(
    data: bytes, *, format: str | None = None, limits: Limits | None = None, zip_limits: ZipLimits | None = None
) -> ParseResult:
    """Detect (or take) the format and parse; a file that cannot be read raises ImportFormatError."""
    limits = limits or Limits()
    if format is not None and format not in FORMATS:
        raise ImportFormatError(f"Unknown format {format!r}; use one of {', '.join(FORMATS)}.", field="format")
    if is_zip(data):
        if format not in (None, "chatgpt"):
            raise ImportFormatError("Only ChatGPT's export comes as a zip.", field="format")
        data = read_member(data, "conversations.json", zip_limits or ZipLimits())
        format = "chatgpt"
    text = _decode(data)
    if format == "jsonl":
        return jsonl.parse(text, limits)
    try:
        document = json.loads(text)
    except ValueError:
        if format is None and jsonl.looks_like(text):
            return jsonl.parse(text, limits)
        raise ImportFormatError(
            "The file is neither JSON nor JSONL: supported are ChatGPT's and Claude's exports "
            "(conversations.json, or ChatGPT's zip), DeLLM's export and JSONL.",
            field="file",
        ) from None
    if format is None:
        if isinstance(document, list) and not document:
            raise ImportFormatError("The file holds no conversations.", field="conversations")
        if isinstance(document, dict) and {"conversation", "role"} <= document.keys():
            # A one-line JSONL file is also a JSON object.
            return jsonl.parse(text, limits)
        format = detect(document)
        if format is None:
            raise ImportFormatError(
                "Unsupported file: not a ChatGPT or Claude conversations.json, a DeLLM export or JSONL.",
                field="file",
            )
    return _JSON_PARSERS[format](document, limits)
