"""The normalized shape every chat-history parser produces, and its errors.

Parsers are pure functions from bytes/JSON to `ParseResult`: no database, no
settings beyond the limits passed in. A conversation that cannot be read is
reported in `ParseResult.errors` (naming the conversation and the field) and
left out; the others are still returned, so the import service can land each
good conversation whole and skip each bad one whole.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from chat.imports.formats.schema import SKIP

# The roles of DeLLM's own messages (its export): `system` is a `/v1` client's
# stored system prompt, restored with its edges like any message; `note` an
# agent's (MCP `remember`), restored with its `agent` edges (one with none
# derives from everything before it, as any reply no edge points at); `tool` a
# `/v1` client's tool result, restored with its `tool` edges (never embedded).
ROLES = ("user", "assistant", "summary", "system", "note", "tool")
# A fact (role `fact`, chat/facts/) is derived from the user's messages: DeLLM's import
# never copies one, nor an edge into or out of one (`ParseResult.facts_skipped`); the
# importing account draws its own facts from the imported messages.
DERIVED_ROLES = ("fact",)


@dataclass(frozen=True)
class Limits:
    """Bounds a parser enforces while reading (settings DELLM_IMPORT_*)."""

    max_conversations: int = 10_000
    max_messages: int = 100_000
    max_conversation_messages: int = 2_000
    max_message_chars: int = 100_000
    # DeLLM's export: the edges one file may bring (each is held until the whole file is read).
    max_edges: int = 1_000_000
    # The text one conversation of a ChatGPT or Claude list may build (every branch,
    # ids included): a conversation is held whole while it is read and while it lands.
    max_conversation_chars: int = 8_000_000

    @property
    def max_conversation_nodes(self) -> int:
        """Entries of one conversation held while it is read (ChatGPT's mapping nodes, Claude's messages).

        Hidden, tool and side-branch nodes are not messages, so this allows
        ten per message of the active branch; more is no real export.
        """
        return 10 * self.max_conversation_messages


@dataclass(frozen=True, slots=True)
class ImportedMessage:
    source_id: str
    role: str
    text: str
    created_at: datetime | None = None
    # DeLLM's export: when it was said (`said_at`), if that is not `created_at`
    # (a message that account had imported): the time the import keeps, while
    # `created_at` still names the exported row (chat/imports/history.py, `_own_rows`).
    said_at: datetime | None = None
    # Position in the whole file when conversations interleave (DeLLM's `seq`).
    order: int | None = None
    # DeLLM's export: the message's id and its thread's id in the account it
    # was exported from. Exported from the importing account itself, they
    # name its own rows (chat/imports/history.py finds them, and imports them never).
    exported_id: int | None = None
    exported_thread: int | None = None
    # DeLLM's export: a reply's `/v1` tool calls ([{"id", "name", "arguments"}])
    # and a `tool` result's call id. Tool steps are never embedded.
    tool_calls: tuple[tuple[str, str, str], ...] = ()
    tool_call_id: str = ""

    @property
    def source_time(self) -> datetime | None:
        """The time in the source tool, kept as the message's `source_created_at` (`Message.said_at`)."""
        return self.said_at or self.created_at

    @property
    def is_tool_step(self) -> bool:
        return self.role == "tool" or bool(self.tool_calls)


@dataclass(frozen=True, slots=True)
class ImportedEdge:
    """An explicit provenance edge between two messages' source ids (DeLLM's own export)."""

    source: str
    target: str
    rank: int
    score: float
    signal: str = ""


@dataclass(frozen=True)
class Conversation:
    """One conversation's active branch, oldest message first."""

    source_id: str
    title: str
    created_at: datetime | None
    messages: list[ImportedMessage] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Outline:
    """A conversation of a list read in outline: where it is in the file and what it holds, not its messages."""

    position: int
    source_id: str
    created_at: datetime | None
    messages: int
    chars: int


@dataclass(frozen=True)
class ConversationError:
    """Why one conversation (or the file, when `conversation` is None) was not imported."""

    conversation: str | None
    field: str
    message: str

    def as_dict(self) -> dict[str, str | None]:
        return {"conversation": self.conversation, "field": self.field, "message": self.message}


@dataclass
class ParseResult:
    format: str
    conversations: list[Conversation] = field(default_factory=list)
    errors: list[ConversationError] = field(default_factory=list)
    # Only DeLLM's own export carries provenance; None means "unknown", and the
    # import records it conservatively. With explicit edges the whole file is
    # one unit (its edges cross threads), keyed by message source id.
    edges: list[ImportedEdge] | None = None
    # A ChatGPT or Claude list read in outline (`parse_file(outline=True)`):
    # `conversations` stays empty, `outlines` lists the good ones in file
    # order, and `read(positions)` parses those again from the file,
    # {position: Conversation}, so that only they are held.
    outlines: list[Outline] | None = None
    # DeLLM's export: the facts (DERIVED_ROLES) and the edges into or out of them left out.
    facts_skipped: int = 0
    fact_edges_skipped: int = 0
    read: Callable[[Collection[int]], dict[int, Conversation]] | None = None

    @property
    def conversation_count(self) -> int:
        return len(self.conversations) if self.outlines is None else len(self.outlines)

    @property
    def message_count(self) -> int:
        if self.outlines is not None:
            return sum(outline.messages for outline in self.outlines)
        return sum(len(c.messages) for c in self.conversations)


class ImportFormatError(ValueError):
    """The file as a whole cannot be imported: nothing of it is."""

    def __init__(self, message: str, *, field: str = "file", conversation: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.conversation = conversation


class ConversationInvalid(ValueError):
    """Raised inside a parser for one conversation; becomes a ConversationError."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def epoch_datetime(value: Any, where: str) -> datetime | None:
    """ChatGPT's `create_time`: seconds since the epoch as a float, or null."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConversationInvalid(where, "is not a number of seconds since the epoch")
    try:
        return datetime.fromtimestamp(value, tz=UTC)
    except (OverflowError, OSError, ValueError):
        raise ConversationInvalid(where, "is out of range") from None


def iso_datetime(value: Any, where: str) -> datetime | None:
    """An ISO-8601 date and time (a naive one is read as UTC), or null."""
    if value is None:
        return None
    if isinstance(value, (bool, int, float)):
        return epoch_datetime(value, where)
    if not isinstance(value, str):
        raise ConversationInvalid(where, "is not a date and time")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ConversationInvalid(where, "is not an ISO-8601 date and time") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def source_key(value: Any, where: str) -> str:
    """An id from the file as a string (ids may be strings or whole numbers)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ConversationInvalid(where, "is missing or not a string")
    key = str(value)
    if not key or len(key) > 200:
        raise ConversationInvalid(where, "must have 1 to 200 characters")
    return key


def check_text(text: str, where: str, limits: Limits) -> str:
    if len(text) > limits.max_message_chars:
        raise ConversationInvalid(where, f"has more than {limits.max_message_chars} characters")
    # PostgreSQL text cannot hold NUL.
    return text.replace("\x00", "")


def check_message_count(count: int, limits: Limits) -> None:
    if count > limits.max_conversation_messages:
        raise ConversationInvalid(
            "messages", f"has more than {limits.max_conversation_messages} messages on its active branch"
        )


class Collector:
    """Parses conversations one at a time as they are read; a bad one becomes an error naming it, the rest go on.

    Past a count limit it builds no more (`item` turns SKIP) but keeps
    counting, so the error names the file's real number of conversations,
    and a broken file still reads as broken before any limit is reported.
    """

    def __init__(
        self, fmt: str, parse_one: Any, limits: Limits, *, id_of: Any, item: Any = None, outline: bool = False
    ) -> None:
        self.outline = outline
        self.result = self._empty(fmt)
        self.parse_one, self.limits, self.id_of, self.item = parse_one, limits, id_of, item
        self.count = 0
        self.total = 0
        self.over_messages = False
        self.seen: set[str] = set()

    def add(self, item: Any, *, over_budget: bool = False) -> None:
        """Parse one conversation; `over_budget`: its text was cut at `max_conversation_chars` (stream.TextBudget)."""
        index = self.count
        self.count += 1
        if self.count > self.limits.max_conversations or self.over_messages:
            self._stop()
            return
        name = self.id_of(item) or f"#{index}"
        try:
            if over_budget:
                raise ConversationInvalid(
                    "messages", f"has more than {self.limits.max_conversation_chars} characters of text"
                )
            conversation = self.parse_one(item, self.limits)
        except ConversationInvalid as exc:
            self.result.errors.append(ConversationError(conversation=name, field=exc.field, message=exc.message))
            return
        if conversation.source_id in self.seen:
            self.result.errors.append(
                ConversationError(conversation=name, field="id", message="appears twice in the file")
            )
            return
        self.seen.add(conversation.source_id)
        self.total += len(conversation.messages)
        if self.total > self.limits.max_messages:
            self.over_messages = True
            self._stop()
            return
        if self.result.outlines is None:
            self.result.conversations.append(conversation)
            return
        self.result.outlines.append(
            Outline(
                position=index,
                source_id=conversation.source_id,
                created_at=conversation.created_at,
                messages=len(conversation.messages),
                chars=sum(len(message.text) for message in conversation.messages),
            )
        )

    def _empty(self, fmt: str) -> ParseResult:
        return ParseResult(format=fmt, outlines=[] if self.outline else None)

    def _stop(self) -> None:
        self.item = SKIP
        self.result = self._empty(self.result.format)
        self.seen = set()

    def finish(self) -> ParseResult:
        if self.count > self.limits.max_conversations:
            raise ImportFormatError(
                f"The file has {self.count} conversations; "
                f"at most {self.limits.max_conversations} can be imported at once.",
                field="conversations",
            )
        if self.over_messages:
            raise ImportFormatError(
                f"The file has more than {self.limits.max_messages} messages; split it.", field="messages"
            )
        return self.result


def collect(fmt: str, items: list[Any], parse_one: Any, limits: Limits, *, id_of: Any) -> ParseResult:
    """Parse each conversation of a list (`Collector`)."""
    collector = Collector(fmt, parse_one, limits, id_of=id_of)
    for item in items:
        collector.add(item)
    return collector.finish()
