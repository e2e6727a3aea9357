"""What a parser reads of an export: the schemas the streaming builder (chat/imports/formats/stream.py) follows.

A schema names the fields to build; whatever it does not name is read past
unbuilt. Kept apart from the builder so that the parsers' shared code
(chat/imports/formats/base.py) can name `SKIP` without importing the reader.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


class _Skip:
    def __repr__(self) -> str:
        return "SKIP"


# Nothing of this value is built.
SKIP: Any = _Skip()
# A scalar is kept as it is; a container here becomes a `Skipped`.
KEEP: Any = None


class Skipped:
    """A container where a parser reads a scalar or the other kind of container: only its kind and emptiness.

    It is no str, int, float, list or dict, so each parser's type check
    fails on it as it did on the container, and it is true if the
    container had anything in it, as the container was (`x or default`).
    """

    __slots__ = ("empty", "kind")

    def __init__(self, kind: str, empty: bool) -> None:
        self.kind = kind
        self.empty = empty

    def __bool__(self) -> bool:
        return not self.empty

    def __repr__(self) -> str:
        return f"<{self.kind}>"

    __str__ = __repr__


@dataclass(frozen=True)
class TooMany:
    """An object with more keys than its schema allows: the rest of it was not built."""

    limit: int


class Reducer(Protocol):
    """Folds an array's items as they are read: `item` is the schema of the next one."""

    item: Any

    def add(self, value: Any) -> None: ...

    def finish(self) -> Any: ...


@dataclass(frozen=True)
class Obj:
    fields: Mapping[str, Any] = field(default_factory=dict)
    # The schema of keys not named in `fields` (ChatGPT's mapping: node ids).
    other: Any = SKIP
    # At most this many keys of `other` are built; more make the value TooMany.
    max_other: int | None = None


@dataclass(frozen=True)
class Arr:
    item: Any = KEEP
    reducer: Callable[[], Reducer] | None = None


def union(*schemas: Obj) -> Obj:
    """One object schema reading every field of each (the first item, before its format is known)."""
    fields: dict[str, Any] = {}
    for schema in schemas:
        fields.update(schema.fields)
    return Obj(fields=fields)


class Capped(list[Any]):
    """An array's first items, and how many it had in all (`total`)."""

    total: int = 0


class CappedReducer:
    """Keeps the first `limit` + 1 items (so `> limit` shows), counts the rest without building them."""

    def __init__(self, item: Any, limit: int) -> None:
        self.item = item
        self.limit = limit
        self.out = Capped()

    def add(self, value: Any) -> None:
        self.out.total += 1
        if self.out.total <= self.limit + 1:
            self.out.append(value)
        if self.out.total >= self.limit + 1:
            self.item = SKIP

    def finish(self) -> Capped:
        return self.out


class TextPieces:
    """The non-blank strings of an array, joined by newlines as they come (at most 64 pieces held).

    `"\\n".join(p for p in parts if isinstance(p, str) and p.strip())` of the
    list this returns equals that of the whole array: joining is associative.
    """

    item = KEEP
    _HELD = 64

    def __init__(self) -> None:
        self.pieces: list[str] = []

    def add(self, value: Any) -> None:
        if isinstance(value, str) and value.strip():
            self.pieces.append(value)
            if len(self.pieces) >= self._HELD:
                self.pieces = ["\n".join(self.pieces)]

    def finish(self) -> list[str]:
        return self.pieces
