"""Identifiers in text (e-mail addresses, phone and card numbers, IBANs, URLs, handles, keys and ids), matched
as the identifier they are: written differently, the same; one character apart, another.

A forget request that names an identifier means that identifier. By meaning,
"dana@example.org" and "dana.kim@example.org" are neighbours, and so are the
keys `prod_7f3a` and `prod_7f3b`; as identifiers they are different, and a
deletion takes the one named only. Each identifier has a canonical form that
surface variants share: case, full-width or other-script look-alike letters
(NFKC, then the common Cyrillic and Greek homoglyphs), quotes and brackets
around it, a leading `@` or `mailto:`, a scheme or `www.`, and for numbers
every separator (`+351 912 345 678`, `912-345-678`). Two phone numbers are the
same when one is the other with its country code (`+351`, `00351`) or trunk
zero. Nothing here is a similarity: canonical forms are equal or they are not.

Linear time: the text is read once into tokens (whitespace-separated, their
surrounding punctuation stripped) and runs of number characters, and each is
classified by string operations and one regular expression without nested
quantifiers per shape.
"""

import re
import unicodedata
from dataclasses import dataclass

from phonenumbers import COUNTRY_CODE_TO_REGION_CODE

COUNTRY_CODES = frozenset(COUNTRY_CODE_TO_REGION_CODE)

# Letters of other scripts drawn like Latin ones (Unicode's confusables, the common part): a look-alike is
# read as the letter it imitates, so "dana@example.org" written with a Cyrillic a (U+0430) is Dana's address.
LOOKALIKES = "аАвВеЕкКмМнНоОрРсСтТуУхХіІјЈѕЅԁһαΑΒεΕΗιΙκΚΜνΝοΟρΡτΤυΥχΧΖ"
LATIN = "aABBeEkKMMHHoOpPcCTTyYxXiIjJsSdhaABeEHiIkKMvNoOpPtTuYxXZ"
_HOMOGLYPHS = str.maketrans(LOOKALIKES, LATIN)
# What may stand around an identifier and is not part of it.
_AROUND = "\"'`“”‘’«»()[]{}<>,;:!?."
# Not "/": "912 345 678 / 913 456 789" is two numbers.
_NUMBER_CHARS = set("0123456789+-(). \u00a0")
_EMAIL = re.compile(r"[a-z0-9][a-z0-9._%+-]*@[a-z0-9-]+(?:\.[a-z0-9-]+)+")
_URL = re.compile(r"(?:https?://|www\.)[^\s]+")
_HANDLE = re.compile(r"@[a-z0-9_][a-z0-9_.]{1,38}")
_CODE = re.compile(r"[a-z0-9]+(?:[-_.:/][a-z0-9]+)*")
_IBAN_HEAD = re.compile(r"[A-Z]{2}[0-9]{2}[A-Z0-9]{0,30}")
_DATE = re.compile(r"[0-9]{4}[-/.][0-9]{1,2}[-/.][0-9]{1,2}|[0-9]{1,2}[-/.][0-9]{1,2}[-/.][0-9]{2,4}")
_SEPARATORS = re.compile(r"[-_.:/]")

KINDS = {
    "email": "e-mail address",
    "url": "web address",
    "phone": "number",
    "iban": "IBAN",
    "code": "key or id",
}
# A number this long is an identifier (a phone, a card, an account); shorter ones are amounts, years, times.
MIN_NUMBER_DIGITS = 6
# A key or id: this long at least, with letters and digits (`prod_7f3a`, `AB-1234`), or letters joined by `_`.
MIN_CODE_CHARS = 5


@dataclass(frozen=True)
class Identifier:
    kind: str  # a key of KINDS
    canonical: str
    surface: str  # as written, surrounding punctuation stripped
    international: bool = False  # a number written with its country code (`+`, `00`)

    def describe(self) -> str:
        """ "the e-mail address dana@example.org": what the preview says it matched."""
        return f"the {KINDS[self.kind]} {self.surface}"


def normalized(text: str) -> str:
    """`text` as identifiers are read in it: NFKC (full-width forms), look-alike letters as Latin ones."""
    return unicodedata.normalize("NFKC", text).translate(_HOMOGLYPHS)


_LOCAL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789._%+-")
_DOMAIN_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789.-")


def _email_around(token: str) -> Identifier | None:
    """The address around the token's first `@`, whatever is stuck to it ("contact:dana@example.org")."""
    at = token.index("@", 1)
    start, end = at, at + 1
    while start and token[start - 1].casefold() in _LOCAL_CHARS:
        start -= 1
    while end < len(token) and token[end].casefold() in _DOMAIN_CHARS:
        end += 1
    surface = token[start:end].strip("._-+%")
    low = surface.casefold()
    return Identifier("email", low, surface) if _EMAIL.fullmatch(low) else None


def _token_identifier(token: str) -> Identifier | None:
    surface = token.strip(_AROUND)
    if len(surface) < 3:
        return None
    low = surface.casefold()
    if low.startswith("mailto:"):
        surface, low = surface[7:], low[7:]
    if "@" in low[1:]:
        email = _email_around(surface)
        if email is not None:
            return email
    if _URL.fullmatch(low):
        bare = low.split("://", 1)[-1].removeprefix("www.").rstrip("/")
        return Identifier("url", bare, surface) if "." in bare else None
    if low.startswith("@"):
        return Identifier("code", _SEPARATORS.sub("", low[1:]), surface) if _HANDLE.fullmatch(low) else None
    if len(low) >= MIN_CODE_CHARS and _CODE.fullmatch(low) and not _DATE.fullmatch(low):
        letters = sum(ch.isalpha() for ch in low)
        digits = sum(ch.isdigit() for ch in low)
        if letters and (digits or "_" in low):
            return Identifier("code", _SEPARATORS.sub("", low), surface)
    return None


def _number_runs(text: str) -> list[tuple[int, int]]:
    """(start, end) of each maximal run of number characters holding MIN_NUMBER_DIGITS digits or more."""
    runs = []
    start = None
    for index, ch in enumerate([*text, "\n"]):
        if ch in _NUMBER_CHARS and not (start is None and ch in " \u00a0.-)"):
            if start is None:
                start = index
            continue
        if start is not None:
            run = text[start:index].rstrip(" \u00a0.-(")
            if sum(c.isdigit() for c in run) >= MIN_NUMBER_DIGITS:
                runs.append((start, start + len(run)))
            start = None
    return runs


def _iban(tokens: list[re.Match[str]], at: int) -> tuple[Identifier, int] | None:
    """An IBAN starting at tokens[at] (written whole or in groups of four), and the tokens it takes."""
    head = tokens[at][0].strip(_AROUND).upper()
    if not _IBAN_HEAD.fullmatch(head):
        return None
    parts, taken = [head], 1
    while at + taken < len(tokens) and len("".join(parts)) < 34:
        # A group is digits and capitals, as IBANs are written: a word after one is not part of it.
        group = tokens[at + taken][0].strip(_AROUND)
        if not (1 <= len(group) <= 4 and group.isalnum() and group.isascii() and group == group.upper()):
            break
        # Letters alone are a bank code right after the head ("GB29 NWBK 6016 ..."), or the next word ("EUR").
        if group.isalpha() and taken > 1:
            break
        parts.append(group)
        taken += 1
    canonical = "".join(parts)
    if not 15 <= len(canonical) <= 34 or sum(ch.isdigit() for ch in canonical) < 8:
        return None
    surface = " ".join(token[0] for token in tokens[at : at + taken]).strip(_AROUND)
    return Identifier("iban", canonical, surface), taken


_TOKEN = re.compile(r"\S+")


def identifiers_in(text: str) -> list[Identifier]:
    """The identifiers `text` holds, in order, each once (by kind and canonical form)."""
    text = normalized(text)
    found: list[Identifier] = []
    # Where the tokens read as an identifier lie: a number inside one (an IBAN's, a key's) is not another.
    claimed: list[tuple[int, int]] = []
    tokens = list(_TOKEN.finditer(text))
    index = 0
    while index < len(tokens):
        iban = _iban(tokens, index)
        taken, identifier = (iban[1], iban[0]) if iban is not None else (1, _token_identifier(tokens[index][0]))
        if identifier is not None:
            found.append(identifier)
            # A number inside an address or an IBAN is part of it; one in a key may be a number too ("Tel.912...").
            if identifier.kind != "code":
                claimed.append((tokens[index].start(), tokens[index + taken - 1].end()))
        index += taken
    spans = iter(claimed)
    span = next(spans, None)
    for start, end in _number_runs(text):
        while span is not None and span[1] <= start:
            span = next(spans, None)
        if span is not None and span[0] < end:
            continue
        surface = text[start:end].strip()
        date = _DATE.match(surface)
        # A date stands alone: "06.12.34.56.78" runs on, and is a number.
        if date is not None and (date.end() == len(surface) or surface[date.end()].isspace()):
            # A date, or a date and what follows it ("2024-01-15 912 345 678"): the rest may be a number.
            surface = surface[date.end() :].strip(" .-")
            if sum(ch.isdigit() for ch in surface) < MIN_NUMBER_DIGITS:
                continue
        digits = "".join(ch for ch in surface if ch.isdigit())
        international = surface.lstrip("(").startswith("+") or digits.startswith("00")
        canonical = digits[2:] if digits.startswith("00") else digits
        found.append(Identifier("phone", canonical, surface, international=international))
    unique: dict[tuple[str, str], Identifier] = {}
    for identifier in found:
        unique.setdefault((identifier.kind, identifier.canonical), identifier)
    return list(unique.values())


def _national(digits: str) -> str:
    return digits[1:] if digits.startswith("0") else digits


def same_identifier(a: Identifier, b: Identifier) -> bool:
    """Whether `a` and `b` are one identifier written two ways."""
    if a.kind != b.kind:
        return False
    if a.canonical == b.canonical:
        return True
    if a.kind != "phone" or a.international == b.international:
        return False
    whole, national = (
        (a.canonical, _national(b.canonical)) if a.international else (b.canonical, _national(a.canonical))
    )
    # What comes before the national number is a country's calling code (libphonenumber's list): "+44 7912 ..."
    # is not "912 ..." with a code "447".
    code = whole[: len(whole) - len(national)]
    return len(national) >= 7 and whole.endswith(national) and code.isdigit() and int(code) in COUNTRY_CODES


def search_fragments(identifier: Identifier) -> tuple[str, str]:
    """What a message holding `identifier` surely contains, in one of the projections the database computes:
    ("digits", the last digits), ("alnum", the lower-case letters and digits), or ("text", lower-case text)."""
    if identifier.kind == "phone":
        return "digits", _national(identifier.canonical)[-7:]
    if identifier.kind in ("iban", "code"):
        return "alnum", _SEPARATORS.sub("", identifier.canonical.casefold())
    return "text", identifier.canonical
