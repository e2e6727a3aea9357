"""Reading an export as a stream of JSON events, building only what a parser reads.

`json.loads` of a 50 MB export whose nodes carry lists of small metadata
objects took over a gigabyte: every object, list and string of the file
became a Python object at once. Here ijson (its C backend, yajl2_c, which its
wheels carry; the pure-Python one otherwise) turns the bytes into events, 64
KiB at a time, and a schema says which fields a parser reads. Those are built;
everything else (metadata, children lists, attachments, unknown fields)
streams past unbuilt, its nesting depth counted. An array may be reduced as it
is read (each item handed on and dropped), so a list of conversations is never
held whole, and an array can stop building items past a count while still
counting them, so a limit's error names the file's real count.

Numbers come as `json.loads` gives them: whole numbers as int, the others as
float (ijson's Decimal converted; 1e400 becomes inf, as json.loads makes it).
"""

from __future__ import annotations

import codecs
import contextlib
import re
from collections.abc import Callable, Generator, Iterable, Iterator
from decimal import Decimal
from typing import Any

import ijson

from chat.imports.formats.base import ImportFormatError
from chat.imports.formats.schema import SKIP, Arr, Obj, Skipped, TooMany

try:
    BACKEND = ijson.get_backend("yajl2_c")
except ImportError:
    BACKEND = ijson.get_backend("python")

CHUNK = 16 * 1024
# Real exports nest about ten levels (ChatGPT's metadata the deepest);
# deeper is an attack on the parser, and skipping it would still walk it.
MAX_DEPTH = 64
NOT_UTF8 = "The file is not UTF-8 text, a JSON export or a zip."
# The longest string of a file, in its bytes between the quotes: yajl holds a
# string whole (its buffer grows by doubling) before ijson builds it, in any
# field, read or skipped, so one string as long as the unpacked file would cost
# several times the file. Text a parser keeps is far shorter
# (DELLM_IMPORT_MAX_MESSAGE_CHARS); this bounds what it reads past.
MAX_STRING_BYTES = 16 * 1024 * 1024
_QUOTE_OR_ESCAPE = re.compile(rb'["\\]')
_BOM = codecs.BOM_UTF8


class NotJSON(Exception):
    """The bytes are not one JSON value (the caller decides what that means: JSONL, or an error)."""


def checked_chunks(
    read: Callable[[int], bytes], *, limit: int | None, name: str, final: bool = True
) -> Iterator[bytes]:
    """The stream's bytes in chunks: a leading BOM dropped, UTF-8 checked, at most `limit` bytes.

    `final=False` for a prefix: a character cut at its end is not an error.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    total = 0
    first = True
    while chunk := read(CHUNK):
        total += len(chunk)
        if limit is not None and total > limit:
            raise ImportFormatError(f"{name} is larger than {limit} bytes.", field=name)
        if first:
            first = False
            if chunk.startswith(_BOM):
                chunk = chunk[len(_BOM) :]
        try:
            decoder.decode(chunk)
        except UnicodeDecodeError:
            raise ImportFormatError(NOT_UTF8, field="file") from None
        yield chunk
    if final:
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise ImportFormatError(NOT_UTF8, field="file") from None


def strings_capped(chunks: Iterable[bytes], limit: int | None = None) -> Iterator[bytes]:
    """The chunks as they are; ImportFormatError once a JSON string runs past `limit` bytes (MAX_STRING_BYTES).

    Linear: a chunk with escapes is read from quote to quote (and, inside a
    string, to each backslash, whose next byte is skipped) with `bytes.find`
    and a one-class regular expression; one without, by counting its quotes.
    Bytes that are not JSON are yajl's to refuse.
    """
    limit = MAX_STRING_BYTES if limit is None else limit
    inside = escaped = False
    length = 0
    for chunk in chunks:
        size, at = len(chunk), 0
        if size <= limit and not escaped and b"\\" not in chunk:
            # No escapes (most chunks of metadata): a string wholly inside is
            # shorter than the chunk, so only the ends count, found in C.
            quotes = chunk.count(b'"')
            if quotes == 0:
                length += size if inside else 0
            else:
                if inside:
                    length += chunk.find(b'"')
                    if length > limit:
                        break
                inside = inside != (quotes % 2 == 1)
                length = size - chunk.rfind(b'"') - 1 if inside else 0
            if length > limit:
                break
            yield chunk
            continue
        if escaped and size:
            escaped, at, length = False, 1, length + 1
        while at < size:
            if not inside:
                quote = chunk.find(b'"', at)
                if quote < 0:
                    break
                inside, length, at = True, 0, quote + 1
                continue
            found = _QUOTE_OR_ESCAPE.search(chunk, at)
            if found is None:
                length += size - at
                break
            stop = found.start()
            if chunk[stop] == 0x22:
                length += stop - at
                inside, at = False, stop + 1
            elif stop + 1 < size:
                length += stop + 2 - at
                at = stop + 2
            else:
                length += size - at
                escaped, at = True, size
            if length > limit:
                break  # a string closed past the limit is refused too
        if length > limit:
            break
        yield chunk
    if length > limit:
        raise ImportFormatError(f"The file has a string longer than {limit} bytes.", field="file")


@contextlib.contextmanager
def _parsing() -> Iterator[None]:
    """NotJSON for what the parser refuses (not for what reading the chunks raises, which has its own message)."""
    try:
        yield
    except (ijson.JSONError, ValueError):
        # ValueError: a number past Python's 4,300-digit limit (the pure-Python backend).
        raise NotJSON from None
    except SystemError as exc:
        # The same number in the C backend, its ValueError wrapped.
        if isinstance(exc.__cause__, ValueError):
            raise NotJSON from None
        raise


def events(chunks: Iterable[bytes], *, final: bool = True) -> Generator[tuple[str, Any], None, None]:
    """ijson's events of the chunks; NotJSON where they stop being JSON (or end too soon, if `final`)."""
    sink = ijson.sendable_list()
    parser = BACKEND.basic_parse_coro(sink)
    closed = False
    try:
        for chunk in chunks:
            with _parsing():
                parser.send(chunk)
            if sink:
                yield from sink
                del sink[:]
        if final:
            closed = True
            with _parsing():
                parser.close()
            yield from sink
    finally:
        # A reader left early (an error, a peek): end the parser now, not when it is collected.
        if not closed:
            with contextlib.suppress(ijson.JSONError):
                parser.close()


def _too_deep() -> ImportFormatError:
    return ImportFormatError(f"The file nests deeper than {MAX_DEPTH} levels.", field="file")


def drain_bounded(it: Iterator[tuple[str, Any]]) -> None:
    """Read to the end, as `drain`, refusing past MAX_DEPTH levels of nesting (a zip of `[` unpacks fast)."""
    depth = 0
    for event, _ in it:
        if event == "start_map" or event == "start_array":
            depth += 1
            if depth > MAX_DEPTH:
                raise _too_deep()
        elif event == "end_map" or event == "end_array":
            depth -= 1


def skip(it: Iterator[tuple[str, Any]], depth: int) -> bool:
    """Read past a container just opened at `depth`, building nothing; whether it was empty."""
    level = 1
    empty = True
    for event, _ in it:
        if event == "start_map" or event == "start_array":
            level += 1
            if depth + level - 1 > MAX_DEPTH:
                raise _too_deep()
        elif event == "end_map" or event == "end_array":
            level -= 1
            if level == 0:
                return empty
        empty = False
    return empty


class TextBudget:
    """The characters of text one value may build (a conversation's); past them its strings are built empty.

    Strings streamed past unbuilt do not count: they are dropped as read.
    `over` says the value was cut, so its parser refuses it whole; what it
    built stays within `chars`, whatever the file holds.
    """

    __slots__ = ("chars", "left", "over")

    def __init__(self, chars: int) -> None:
        self.chars = chars
        self.left = chars
        self.over = False

    def take(self, text: str) -> str:
        self.left -= len(text)
        if self.left >= 0:
            return text
        self.over = True
        return ""


def build(
    it: Iterator[tuple[str, Any]],
    event: str,
    value: Any,
    schema: Any,
    depth: int = 0,
    budget: TextBudget | None = None,
) -> Any:
    """The value that starts with (event, value), built as far as `schema` reads it (its text within `budget`)."""
    if event == "start_map":
        if depth + 1 > MAX_DEPTH:
            raise _too_deep()
        if isinstance(schema, Obj):
            return _object(it, schema, depth + 1, budget)
        empty = skip(it, depth + 1)
        return None if schema is SKIP else Skipped("object", empty)
    if event == "start_array":
        if depth + 1 > MAX_DEPTH:
            raise _too_deep()
        if isinstance(schema, Arr):
            return _array(it, schema, depth + 1, budget)
        empty = skip(it, depth + 1)
        return None if schema is SKIP else Skipped("list", empty)
    if type(value) is Decimal:
        return float(value)
    if budget is not None and type(value) is str:
        return budget.take(value)
    return value


def _object(it: Iterator[tuple[str, Any]], schema: Obj, depth: int, budget: TextBudget | None) -> Any:
    out: dict[str, Any] = {}
    others = 0
    too_many = False
    for event, key in it:
        if event == "end_map":
            return TooMany(schema.max_other) if too_many and schema.max_other is not None else out
        if too_many:
            sub = SKIP
        elif key in schema.fields:
            sub = schema.fields[key]
        else:
            sub = schema.other
            if sub is not SKIP:
                others += 1
                if schema.max_other is not None and others > schema.max_other:
                    too_many, sub, out = True, SKIP, {}
                elif budget is not None:
                    # A kept key (a node id) is text built too.
                    key = budget.take(key)
        event, value = next(it)
        if sub is SKIP:
            if event == "start_map" or event == "start_array":
                if depth + 1 > MAX_DEPTH:
                    raise _too_deep()
                skip(it, depth + 1)
            continue
        out[key] = build(it, event, value, sub, depth, budget)
    return out


def _array(it: Iterator[tuple[str, Any]], schema: Arr, depth: int, budget: TextBudget | None) -> Any:
    reducer = schema.reducer() if schema.reducer is not None else None
    out: list[Any] = []
    for event, value in it:
        if event == "end_array":
            return reducer.finish() if reducer is not None else out
        sub = reducer.item if reducer is not None else schema.item
        item = build(it, event, value, sub, depth, budget)
        if reducer is not None:
            reducer.add(item)
        else:
            out.append(item)
    return reducer.finish() if reducer is not None else out


def drain(it: Iterator[tuple[str, Any]]) -> None:
    """Read to the end, so that bytes after the value (or a broken one) still make NotJSON."""
    for _ in it:
        pass
