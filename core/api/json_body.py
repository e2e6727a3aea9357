"""The one JSON parser of every door that reads a JSON body.

`json.loads` recurses once per nested array or object, in C, and gives up
with `RecursionError` (not a `ValueError`) somewhere near a thousand levels:
`[` x 100,000 sent to any JSON endpoint was a 500 with a traceback. Here the
nesting depth is measured first, by a scan that cannot recurse and runs in
time linear in the body, and a body deeper than DELLM_JSON_MAX_DEPTH is
refused as malformed before `json.loads` sees it.

Used by the DRF parser of every `/api/` view (`JSONParser` below, set in
REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]), by `/v1/` (a plain Django view) and,
as the depth check alone, by `/mcp` (core/api/asgi_body.py), whose SDK then
parses the body itself.
"""

import json
import re
from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from rest_framework import parsers
from rest_framework.exceptions import ParseError

# What the scan stops at. One character class, so the regex engine tries each
# position once: the search is linear, and so is the loop over its matches.
_MARKS = re.compile(r'[\[\]{}"\\]')


class JSONTooDeep(ValueError):
    """A JSON document nested deeper than the limit (a ValueError, like every other malformed body)."""


def json_depth_exceeds(text: str, limit: int) -> bool:
    """Whether `text` nests arrays and objects more than `limit` deep, brackets inside strings not counted.

    Where `text` is valid JSON this is its nesting depth; where it is not, the
    depth agrees with the JSON grammar up to the first error, which is as far
    as `json.loads` reads, so the parser never goes deeper than the scan saw.
    """
    # Cheap first: a body with few brackets cannot be deep (most bodies).
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    in_string = False
    escaped = -1  # the position a backslash in a string escapes
    for mark in _MARKS.finditer(text):
        at = mark.start()
        if at == escaped:
            continue
        char = mark.group()
        if char == "\\":
            escaped = at + 1
        elif char == '"':
            in_string = not in_string
        elif in_string:
            continue
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def json_text(raw: bytes | str) -> str:
    """`raw` as text: bytes decoded as `json.loads` decodes them (UTF-8, -16 or -32, detected); ValueError if not."""
    return raw.decode(json.detect_encoding(raw), "surrogatepass") if isinstance(raw, bytes) else raw


def json_depth_check(text: str) -> None:
    """Refuse (JSONTooDeep) a document nested deeper than DELLM_JSON_MAX_DEPTH, before any parser reads it."""
    limit = settings.DELLM_JSON_MAX_DEPTH
    if json_depth_exceeds(text, limit):
        raise JSONTooDeep(f"arrays and objects are nested more than {limit} deep")


def json_parse(raw: bytes | str) -> Any:
    """The value of a JSON document, or ValueError (JSONTooDeep beyond DELLM_JSON_MAX_DEPTH).

    Bytes are decoded as `json.loads` does (`json_text`); `NaN` and
    `Infinity` are refused, as JSON has neither.
    """
    text = json_text(raw)
    json_depth_check(text)
    return json.loads(text, parse_constant=_no_constants)


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser on `json_parse`: a body nested too deep is a 400 `malformed_request`, like any bad JSON."""

    def parse(self, stream: IO[bytes], media_type: str | None = None, parser_context: Mapping | None = None) -> Any:
        # A text charset only: Django takes any codec's name ("base64", "bz2_codec").
        encoding = parsers.get_encoding(parser_context or {})  # type: ignore[attr-defined]  # not in its stubs yet
        try:
            # The whole body, as DRF's own parser reads it (`json.load` reads the stream to its end).
            return json_parse(stream.read().decode(encoding))
        except ValueError as exc:  # UnicodeDecodeError too
            raise ParseError(f"JSON parse error - {exc}") from None
