"""A deletion's selection by identifier: the owner's messages that hold the identifiers named, and no other.

The database narrows the messages down (each holds a fragment every way of
writing the identifier shares, in a projection of its text: the digits, the
letters and digits, or the lower-case text, after the same normalisation as
`identifiers.normalized`); each candidate is then read for its identifiers
and kept only if one is the same as one named (`identifiers.same_identifier`).
The messages that hold an identifier of the same kind that is not the one
named (another address at the same domain, the key one character apart) are
the near misses, kept deliberately: the preview lists them, by id and kind,
so the user can take them too.
"""

from dataclasses import dataclass, field

from django.db.models import F, Func, Q, QuerySet, TextField, Value
from django.db.models.functions import Lower

from chat.models import Message
from core.errors import ValidationFailed
from core.types import User
from provenance.deletions.identifiers import (
    KINDS,
    LATIN,
    LOOKALIKES,
    Identifier,
    identifiers_in,
    same_identifier,
    search_fragments,
)

# The near misses a preview lists, the newest first, and the messages read to find them.
NEAR_MISSES_LISTED = 20
NEAR_MISSES_SCANNED = 500
# What one selection may name: each identifier is a clause of the database's filter.
MAX_IDENTIFIER_CHARS = 1000
MAX_IDENTIFIERS = 20


@dataclass
class IdentifierMatch:
    named: list[Identifier]
    matched: list[int] = field(default_factory=list)
    # {message id: how the identifier is written there}: what a redaction of that message removes.
    written: dict[int, str] = field(default_factory=dict)
    near_misses: list[dict[str, object]] = field(default_factory=list)

    def held_after(self, text: str) -> bool:
        """Whether `text` (a redaction on offer) still holds an identifier named: then it is not offered."""
        return any(same_identifier(i, n) for i in identifiers_in(text) for n in self.named)

    def resolution(self) -> dict[str, object]:
        """What the preview says about the selection: what was named, and what was kept although close."""
        return {
            "kind": "identifier",
            "named": [{"kind": i.kind, "as": i.describe()} for i in self.named],
            "near_misses": self.near_misses,
        }


def _projected() -> Func:
    text = TextField()
    normalized = Func(F("content"), template="normalize(%(expressions)s, NFKC)", output_field=text)
    return Func(normalized, Value(LOOKALIKES), Value(LATIN), function="translate", output_field=text)


def _only(expression: Func, pattern: str) -> Func:
    """`expression` with every character matching `pattern` (a class) removed."""
    return Func(expression, Value(pattern), Value(""), Value("g"), function="regexp_replace", output_field=TextField())


_PROJECTIONS = {
    "text": lambda: Lower(_projected()),
    "alnum": lambda: _only(Lower(_projected()), "[^a-z0-9]"),
    "digits": lambda: _only(_projected(), "[^0-9]"),
}


def _holding(messages: QuerySet[Message], fragments: list[tuple[str, str]]) -> QuerySet[Message]:
    """The messages whose projections hold one of `fragments`."""
    wanted = Q()
    for projection, fragment in fragments:
        wanted |= Q(**{f"_{projection}__contains": fragment})
    used = {projection for projection, _ in fragments}
    return messages.alias(**{f"_{name}": _PROJECTIONS[name]() for name in used}).filter(wanted)


def _loose(identifier: Identifier) -> tuple[str, str]:
    """A fragment the identifier's neighbours share with it: the domain, the first digits or characters."""
    projection, fragment = search_fragments(identifier)
    if identifier.kind == "email":
        return projection, "@" + identifier.canonical.split("@", 1)[1]
    if identifier.kind == "url":
        return projection, identifier.canonical.split("/", 1)[0]
    return projection, fragment[: max(3, len(fragment) - 3)]


def identifier_select(*, owner: User, text: str | None, statuses: list[str]) -> IdentifierMatch:
    """The owner's messages in `statuses` holding an identifier `text` names (ValidationFailed if it names none)."""
    if isinstance(text, str) and len(text) > MAX_IDENTIFIER_CHARS:
        raise ValidationFailed(
            f"Name identifiers in at most {MAX_IDENTIFIER_CHARS} characters.", fields={"identifier": "too long"}
        )
    named = identifiers_in(text) if isinstance(text, str) else []
    if len(named) > MAX_IDENTIFIERS:
        raise ValidationFailed(f"At most {MAX_IDENTIFIERS} identifiers at once.", fields={"identifier": "too many"})
    if not named:
        raise ValidationFailed(
            "Name an identifier to delete: an e-mail address, a phone or card number, an IBAN, a web address, "
            "a handle or a key.",
            fields={"identifier": "none found"},
        )
    found = IdentifierMatch(named=named)
    # Never a system prompt: selected by its exact words or its id only (its blast radius is its whole thread).
    messages = Message.objects.filter(owner=owner, status__in=statuses).exclude(role=Message.Role.SYSTEM)
    candidates = _holding(messages, [search_fragments(i) for i in named]).values_list("pk", "content")
    unread: list[int] = []
    for pk, content in candidates.iterator():
        same = [i for i in identifiers_in(content) if any(same_identifier(i, n) for n in named)]
        if same:
            found.matched.append(pk)
            # Redacted only where it is written once, as it stands in the text (`held_after` checks the rest).
            if len(same) == 1 and content.count(same[0].surface) == 1:
                found.written[pk] = same[0].surface
        else:
            unread.append(pk)
    found.matched.sort()
    # Messages that hold the characters but were not read as the identifier are near misses too: the user sees them.
    for pk in unread[:NEAR_MISSES_LISTED]:
        found.near_misses.append({"message": pk, "kind": named[0].kind, "reason": "holds the same characters"})
    near = _holding(messages.exclude(pk__in=[*found.matched, *unread]), [_loose(i) for i in named]).order_by("-seq")
    kinds = {i.kind for i in named}
    for pk, content in near.values_list("pk", "content")[:NEAR_MISSES_SCANNED].iterator():
        if len(found.near_misses) >= NEAR_MISSES_LISTED:
            break
        others = {i.kind for i in identifiers_in(content) if i.kind in kinds}
        if others:
            kind = min(others)
            found.near_misses.append({"message": pk, "kind": kind, "reason": f"holds another {KINDS[kind]}"})
    return found
