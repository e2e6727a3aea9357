"""Checks on what a client sent, shared by the doors: whole numbers in text, and text PostgreSQL can store."""


def whole_number(text: str, *, digits: int) -> int | None:
    """The value of `text` if it is a whole number of at most `digits` ASCII digits, else None.

    ASCII only: `str.isdigit()` also takes "²", which `int()` refuses; and a
    bound on the digits keeps `int()` far from Python's 4,300-digit limit.
    """
    if not (text.isascii() and text.isdigit()) or len(text) > digits:
        return None
    return int(text)


def unstorable(text: str) -> str | None:
    """Why PostgreSQL cannot store `text` as text (a NUL, a lone surrogate), or None when it can."""
    if "\x00" in text:
        return "Text may not contain NUL characters."
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "Text may not contain lone surrogate characters."
    return None
