"""Parsers of other tools' chat histories into one normalized shape.

`parse_file(data, format=None, limits=...)` reads an upload (bytes or a
binary file: a JSON file, a JSONL file, or a ChatGPT export zip), detects the
format unless one is forced, and returns a `ParseResult`. Pure: no database
access. The file is read as a stream (chat/imports/formats/stream.py): only the
fields a parser reads are built, one conversation at a time, counts, sizes
and nesting checked while reading. `sniff_file` is the cheap part, for the
web request: the zip's headers and the first `PEEK_BYTES` of the text.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterator
from typing import IO, Any, NoReturn

from chat.imports.formats import chatgpt, claude, dellm, jsonl
from chat.imports.formats.archive import Payload, ZipLimits, as_file, is_zip, zip_member
from chat.imports.formats.base import (
    Collector,
    Conversation,
    ConversationError,
    ImportedEdge,
    ImportedMessage,
    ImportFormatError,
    Limits,
    Outline,
    ParseResult,
)
from chat.imports.formats.schema import SKIP, union
from chat.imports.formats.stream import NotJSON, TextBudget, build, drain, drain_bounded, events, strings_capped

FORMATS = ("chatgpt", "claude", "dellm", "jsonl")
# What the web request reads of the (unpacked) text to tell the format.
PEEK_BYTES = 1024 * 1024

__all__ = [
    "FORMATS",
    "PEEK_BYTES",
    "Conversation",
    "ConversationError",
    "ImportFormatError",
    "ImportedEdge",
    "ImportedMessage",
    "Limits",
    "Outline",
    "ParseResult",
    "ZipLimits",
    "parse_file",
    "sniff_file",
]

NEITHER = (
    "The file is neither JSON nor JSONL: supported are ChatGPT's and Claude's exports "
    "(conversations.json, or ChatGPT's zip), DeLLM's export and JSONL."
)
UNSUPPORTED = "Unsupported file: not a ChatGPT or Claude conversations.json, a DeLLM export or JSONL."
_LISTS = {"chatgpt": chatgpt, "claude": claude}


def _unsupported() -> ImportFormatError:
    return ImportFormatError(UNSUPPORTED, field="file")


def _empty() -> ImportFormatError:
    return ImportFormatError("The file holds no conversations.", field="conversations")


def _payload(data: bytes | IO[bytes], format: str | None, zip_limits: ZipLimits) -> tuple[Payload, str | None]:
    if format is not None and format not in FORMATS:
        raise ImportFormatError(f"Unknown format {format!r}; use one of {', '.join(FORMATS)}.", field="format")
    file = as_file(data)
    if not is_zip(file):
        return Payload(file=file), format
    if format not in (None, "chatgpt"):
        raise ImportFormatError("Only ChatGPT's export comes as a zip.", field="format")
    return zip_member(file, "conversations.json", zip_limits), "chatgpt"


def lines(payload: Payload, limits: Limits) -> Iterator[str]:
    """The text's lines as `str.splitlines` cuts them, each physical line at most `jsonl.max_line_bytes`."""
    cap = jsonl.max_line_bytes(limits)
    pending = b""
    number = 0
    for chunk in payload.chunks():
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            number += 1
            yield from (line + b"\n").decode("utf-8").splitlines()
        if len(pending) > cap:
            raise ImportFormatError(f"Line {number + 1} is longer than {cap} bytes.", field=f"line {number + 1}")
    if pending:
        yield from pending.decode("utf-8").splitlines()


def parse_file(
    data: bytes | IO[bytes],
    *,
    format: str | None = None,
    limits: Limits | None = None,
    zip_limits: ZipLimits | None = None,
    outline: bool = False,
    reopen: Callable[[], bytes | IO[bytes]] | None = None,
) -> ParseResult:
    """Detect (or take) the format and parse; a file that cannot be read raises ImportFormatError.

    Held at once: the conversations parsed so far (their messages' text and
    ids) and the fields of the one being read; DeLLM's export, one unit, is
    held whole in those fields (its threads, messages and edges are counted
    past their limits without being built), and so is a JSONL file (a
    conversation's lines may lie anywhere in it).

    `outline=True`: a ChatGPT or Claude list is read whole, every limit and
    conversation checked as before, but each conversation is kept only as
    its `Outline`; `ParseResult.read(positions)` parses the conversations at
    those positions again, building nothing of the others, from `reopen()`
    (the same bytes, fetched again for each read) or else from `data`, which
    must then stay as it is. Other formats are parsed as without it.
    """
    limits = limits or Limits()
    zip_limits = zip_limits or ZipLimits()
    payload, format = _payload(data, format, zip_limits)
    if format == "jsonl":
        return jsonl.parse(lines(payload, limits), limits)

    if reopen is None:

        def again() -> Payload:
            return payload

    else:

        def again() -> Payload:
            # Not `payload`: this closure must not keep the first copy of the bytes alive.
            return _payload(reopen(), None, zip_limits)[0]

    try:
        return _parse_json(payload, format, limits, again if outline else None)
    except NotJSON:
        if format is None and jsonl.looks_like(lines(payload, limits)):
            return jsonl.parse(lines(payload, limits), limits)
        raise ImportFormatError(NEITHER, field="file") from None


def _parse_json(
    payload: Payload, format: str | None, limits: Limits, outline: Callable[[], Payload] | None = None
) -> ParseResult:
    it = events(strings_capped(payload.chunks()))
    event, value = next(it, ("end", None))
    if event == "start_array" and format in (None, "chatgpt", "claude"):
        return _parse_list(it, format, limits, outline)
    if event == "start_map" and format in (None, "dellm"):
        schema = dellm.schema(limits) if format == "dellm" else union(dellm.schema(limits), jsonl.LINE)
        document = build(it, event, value, schema)
        drain(it)
        if format is None and {"conversation", "role"} <= document.keys():
            # A one-line JSONL file is also a JSON object.
            return jsonl.parse(lines(payload, limits), limits)
        if format is None and not dellm.looks_like(document):
            raise _unsupported()
        return dellm.parse(document, limits)
    # Anything else is refused, once the whole file is known to be JSON.
    build(it, event, value, SKIP)
    drain(it)
    if format in _LISTS:
        raise _LISTS[format].not_a_list()
    if format == "dellm":
        return dellm.parse(None, limits)
    raise _unsupported()


def _parse_list(
    it: Iterator[tuple[str, Any]],
    format: str | None,
    limits: Limits,
    outline: Callable[[], Payload] | None = None,
) -> ParseResult:
    """A list of ChatGPT or Claude conversations, each parsed as soon as it is read; the first decides the format.

    `outline`: where to read the conversations again from (`parse_file(outline=True)`).
    """
    event, value = next(it)
    if event == "end_array":
        drain(it)
        if format is None:
            raise _empty()
        if outline is None:
            return ParseResult(format=format)
        return ParseResult(format=format, outlines=[], read=_read_none)
    budget = TextBudget(limits.max_conversation_chars)
    if format is None:
        first_schema = union(chatgpt.schema(limits), claude.schema(limits))
        first = build(it, event, value, first_schema, 1, budget)
        format = "chatgpt" if chatgpt.looks_like(first) else "claude" if claude.looks_like(first) else None
        if format is None:
            drain(it)
            raise _unsupported()
    else:
        first_schema = _LISTS[format].schema(limits)
        first = build(it, event, value, first_schema, 1, budget)
    module = _LISTS[format]
    collector = Collector(
        format,
        module.parse_conversation,
        limits,
        id_of=module.conversation_id,
        item=module.schema(limits),
        outline=outline is not None,
    )
    collector.add(first, over_budget=budget.over)
    for event, value in it:
        if event == "end_array":
            break
        budget = TextBudget(limits.max_conversation_chars)
        collector.add(build(it, event, value, collector.item, 1, budget), over_budget=budget.over)
    drain(it)
    result = collector.finish()
    if outline is not None:
        again, fmt = outline, format

        def read(positions: Collection[int]) -> dict[int, Conversation]:
            return _read_list(again(), fmt, limits, first_schema, positions) if positions else {}

        result.read = read
    return result


def _read_none(positions: Collection[int]) -> dict[int, Conversation]:
    return {}


def _read_list(
    payload: Payload, format: str, limits: Limits, first_schema: Any, positions: Collection[int]
) -> dict[int, Conversation]:
    """The conversations at `positions` of a list the outline pass read whole, parsed as that pass parsed them.

    The others stream past unbuilt; reading stops after the last one wanted.
    """
    wanted = set(positions)
    if not wanted:
        return {}
    module = _LISTS[format]
    item = module.schema(limits)
    last = max(wanted)
    found: dict[int, Conversation] = {}
    with contextlib.closing(events(payload.chunks())) as it:
        next(it)  # the list's start_array
        for position, (event, value) in enumerate(it):
            if event == "end_array" or position > last:
                break
            if position not in wanted:
                build(it, event, value, SKIP, 1)
                continue
            # The outline pass found it good: parsing the same bytes the same way cannot fail now.
            found[position] = module.parse_conversation(
                build(it, event, value, first_schema if position == 0 else item, 1), limits
            )
    return found


def sniff_file(
    data: bytes | IO[bytes],
    *,
    format: str | None = None,
    limits: Limits | None = None,
    zip_limits: ZipLimits | None = None,
    peek: int = PEEK_BYTES,
) -> str | None:
    """The format, from the zip's headers and the text's first `peek` bytes; None if those do not tell.

    Raises ImportFormatError for what these bytes already show to be
    unreadable: not UTF-8, not JSON or JSONL, no conversations, an
    unsupported shape, a damaged zip or one too large by its headers. What
    lies further in (and a forced format's shape) only `parse_file` finds.
    Builds nothing: memory is the peek, whatever the file holds.
    """
    limits = limits or Limits()
    payload, format = _payload(data, format, zip_limits or ZipLimits())
    read = 0

    def prefix() -> Iterator[bytes]:
        nonlocal read
        for chunk in payload.chunks(peek=peek):
            read += len(chunk)
            yield chunk

    if format is not None:
        for _ in prefix():
            pass
        return _whole_syntax(payload, format, limits)
    try:
        sniffed = _sniff_json(events(prefix(), final=False), complete=lambda: read < peek)
    except NotJSON:
        first = next((line for line in _prefix_lines(payload, peek) if line.strip()), None)
        if first is not None and jsonl.looks_like([first]):
            return _whole_syntax(payload, "jsonl", limits)
        if first is None and read >= peek:
            return None
        raise ImportFormatError(NEITHER, field="file") from None
    return sniffed if sniffed is None else _whole_syntax(payload, sniffed, limits)


CUT_SHORT = "The file is not whole JSON: it ends too soon or breaks somewhere. Export it again, or check the download."


def _whole_syntax(payload: Payload, format: str, limits: Limits) -> str:
    """`format`, once the whole file is read as a stream and found well-formed (JSONL: every line JSON).

    A truncated export would otherwise be accepted (202) and fail later in the worker. One linear pass
    of the parser over the bytes, memory bounded by its chunk (strings capped as the import caps them);
    the shape is `parse_file`'s to check.
    """
    if format == "jsonl":
        for number, line in enumerate(lines(payload, limits), start=1):
            if line.strip():
                try:
                    drain_bounded(events([line.encode()]))
                except NotJSON:
                    raise ImportFormatError(f"Line {number} is not JSON: {CUT_SHORT}", field="file") from None
        return format
    try:
        drain_bounded(events(strings_capped(payload.chunks())))
    except NotJSON:
        raise ImportFormatError(CUT_SHORT, field="file") from None
    return format


def _prefix_lines(payload: Payload, peek: int) -> Iterator[str]:
    """The complete lines of the prefix."""
    text = b"".join(payload.chunks(peek=peek))
    complete, _, rest = text.rpartition(b"\n")
    yield from complete.decode("utf-8", errors="replace").splitlines()
    if len(text) < peek:
        yield from rest.decode("utf-8", errors="replace").splitlines()


def _sniff_json(it: Iterator[tuple[str, Any]], *, complete: Any) -> str | None:
    """The format the first events show, with `parse_file`'s rules; None where the prefix ends first."""
    event, _ = next(it, ("end", None))
    if event == "end":
        return None
    if event == "start_array":
        event, _ = next(it, ("end", None))
        if event == "end":
            return None
        if event == "end_array":
            drain(it)
            if complete():
                raise _empty()
            return None
        if event != "start_map":
            _unless_broken(it)
        keys = _top_keys(it, stop={"mapping"})
        if keys is None:
            return None
        if "mapping" in keys:
            return "chatgpt"
        return "claude" if "chat_messages" in keys else _unless_broken(it)
    if event == "start_map":
        keys = _top_keys(it, stop=set())
        if keys is None:
            return None
        if {"conversation", "role"} <= keys:
            return "jsonl"
        return "dellm" if {"threads", "messages", "edges"} <= keys else _unless_broken(it)
    return _unless_broken(it)


def _unless_broken(it: Iterator[tuple[str, Any]]) -> NoReturn:
    """An unsupported shape: refused, unless what follows in the prefix is not JSON (then NotJSON)."""
    drain(it)
    raise _unsupported()


def _top_keys(it: Iterator[tuple[str, Any]], *, stop: set[str]) -> set[str] | None:
    """The keys of the object just opened (up to a key in `stop`); None if the prefix ends first."""
    keys: set[str] = set()
    level = 1
    for event, value in it:
        if event == "map_key" and level == 1:
            keys.add(value)
            if value in stop:
                return keys
        elif event == "start_map" or event == "start_array":
            level += 1
        elif event == "end_map" or event == "end_array":
            level -= 1
            if level == 0:
                return keys
    return None
