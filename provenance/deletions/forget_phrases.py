"""Deletion requests written in natural language ("forget that I live in Paris").

`parse_deletion_request` is a pure function: it reads a message typed in the
chat and says whether it asks to delete memories, and which: by number
("remove message 12"), by exact phrase (anything in quotes) or by meaning
(everything else). It errs towards "not a request": a false positive hides a
normal message from the assistant, while a missed request can be typed again
or made from the deletions page, and either way nothing is deleted until the
user confirms the preview.

A request that names an identifier (an e-mail address, a number, a key:
`provenance/deletions/identifiers.py`) selects by that identifier, whatever
else it says: "forget dana@example.org" means that address, never its
neighbour by meaning. Named alone, with at most words that say what it is
("delete my old phone number +351 912 345 678"), it is a request even
without the phrasings below.

`resolve_deletion_request` turns the parse into the keyword arguments of
`provenance.deletions.preview.deletion_preview`.
"""

import re
from dataclasses import dataclass
from typing import Any

from chat.selectors import message_ids_by_seq
from core.errors import ValidationFailed
from core.types import User
from provenance.deletions.by_words import topic_subject
from provenance.deletions.identifiers import identifiers_in, normalized

# Deletion requests are one short sentence; a longer text is an ordinary message
# (and the patterns below never run on unbounded input).
MAX_REQUEST_CHARS = 1000
# A deletion typed in a chat (the web chat, `/v1`) is parsed by rules that can
# misread; the mode it previews is the restorable one. A purge is asked for on
# /api/deletions/.
TYPED_REQUEST_MODE = "soft"


@dataclass(frozen=True)
class DeletionSelection:
    """`kind` is "seqs" (the user's message numbers), "identifier", "exact" or "semantic"."""

    kind: str
    seqs: tuple[int, ...] = ()
    text: str = ""


_POLITE = r"(?:(?:please|pls|kindly|ok(?:ay)?|hey|so|now|and|also|just|go ahead and|" + (
    r"(?:can|could|would|will) you|i (?:want|need|would like|'d like) you to|i'd like you to),?\s+)*"
)
_VERB = r"(?P<verb>forget|delete|remove|erase|purge|wipe|scrub|unlearn|get rid of)"
_MEMORY_OWNERS = ("your ", "my ", "the ", "our ", "")
_MEMORY_NOUNS = ("memory", "memories", "history", "chat history", "record", "records", "notes", "messages")
_MEMORY = rf"(?:{'|'.join(o for o in _MEMORY_OWNERS if o)})?(?:{'|'.join(_MEMORY_NOUNS)})"
# Trailing words that add nothing: "... from your memory, please." Stripped one
# phrase at a time from the right, longest first, without a regular expression:
# the pattern this replaces nested `\s*[,;]?\s*` inside `(...)+` and took
# exponential time on "forget please please ... x".
_TAIL_PHRASES = sorted(
    {f"{prep} {owner}{noun}" for prep in ("from", "out of", "in") for owner in _MEMORY_OWNERS for noun in _MEMORY_NOUNS}
    | {"please", "pls", "thanks", "thank you", "for me", "for good", "forever", "permanently", "completely"}
    | {"entirely", "now", "right now"},
    key=len,
    reverse=True,
)
_END_CHARS = ".!?"

_HEAD = re.compile(rf"^\s*{_POLITE}{_VERB}\b\s*(?P<rest>.*)$", re.IGNORECASE | re.DOTALL)

# "message 12", "messages 3, 4 and 7", "#12", "msg #5 and #6"
_NUMBERED = re.compile(
    r"^(?:(?:the |my )?(?:messages?|msgs?|number|no\.?)\s*)?"
    r"(?P<nums>#?\d{1,15}(?:\s*(?:,|and|&|,\s*and)\s*#?\d{1,15})*)$",
    re.IGNORECASE,
)

# An exact phrase in double or typographic quotes, or in single quotes that
# stand apart from words (so "I've" is no quote).
_QUOTED = re.compile(r"\"(?P<a>[^\"]+)\"|“(?P<b>[^”]+)”|‘(?P<c>[^’]+)’|(?<![\w])'(?P<d>[^']+)'(?![\w])")
# What may stand between the verb and the quoted phrase.
_BEFORE_QUOTE = re.compile(
    r"^(?:(?:the |any |all |every |my )?(?:messages?|memories|lines?|entries|everything|anything|"
    r"what i (?:said|wrote|typed))?\s*"
    r"(?:that |which |where i )?(?:contains?|containing|with|mentioning|mentions?|saying|says|said|"
    r"with the (?:words?|phrase|text)|the (?:words?|phrase|text))?\s*:?\s*)$",
    re.IGNORECASE,
)

_SAID = (
    r"(?:said|told you|wrote|written|typed|mentioned|shared|shared with you|say|tell you|talked|spoke|"
    r"talk|speak|asked|asked you)"
)
_SEMANTIC = [
    # "everything I told you about my ex", "what I said about my job"
    re.compile(
        r"^(?:everything|anything|all|what|whatever|all that|the things?|the stuff|things|stuff)\s+(?:that\s+)?"
        rf"(?:i|i've|i have|i had)\s+(?:ever\s+|just\s+)?{_SAID}\s+(?:to you\s+|you\s+)?"
        r"(?:about|regarding|concerning|on|of)\s+(?P<topic>.+)$",
        re.IGNORECASE | re.DOTALL,
    ),
    # "everything you know about my health"
    re.compile(
        r"^(?:everything|anything|all|what|whatever)\s+(?:that\s+)?(?:you\s+(?:know|remember|have|learned|"
        r"stored|saved)\s+)?(?:about|regarding|concerning|on)\s+(?P<topic>.+)$",
        re.IGNORECASE | re.DOTALL,
    ),
    # "all messages about my salary", "the conversations where I talked about Bob"
    re.compile(
        r"^(?:the |all |any |all the |every |my )?(?:messages?|chats?|conversations?|memories|memory|notes?|"
        r"entries|things|stuff)\s+(?:about|regarding|concerning|mentioning|that mention|on the topic of|"
        rf"(?:where|in which|when) i\s+{_SAID}\s+(?:about\s+)?)\s*(?P<topic>.+)$",
        re.IGNORECASE | re.DOTALL,
    ),
    # "that I live in Paris", "the fact that I'm allergic to nuts"
    re.compile(r"^(?:the fact\s+)?that\s+(?P<topic>[^\s,;:.!?].*)$", re.IGNORECASE | re.DOTALL),
]
# "messages containing hunter2": a phrase without quotes, still matched exactly.
_CONTAINING = re.compile(
    r"^(?:the |all |any |every )?(?:messages?|everything|anything|lines?|entries)\s+"
    r"(?:containing|that contains?|which contains?|with the (?:words?|phrase|text))\s+(?P<topic>.+)$",
    re.IGNORECASE | re.DOTALL,
)
# Only after "forget": "forget about my ex", "forget I live in Paris", "forget my address".
_FORGET_ONLY = [
    re.compile(r"^about\s+(?P<topic>.+)$", re.IGNORECASE | re.DOTALL),
    re.compile(r"^(?P<topic>(?:i|i'm|i am|i've|i have|i was|my)\s+.+)$", re.IGNORECASE | re.DOTALL),
    # "forget where I work", "forget what I eat", "forget who I'm married to"
    re.compile(
        r"^(?P<topic>(?:where|what|who|when|how|which)\s+(?:i|i'm|i am|i've|i have|i was|i used to|my)\s+.+)$",
        re.IGNORECASE | re.DOTALL,
    ),
]
# "delete my phone number from your memory": a bare object needs the memory words.
_MY_OBJECT = re.compile(rf"^(?P<topic>my\s+.+?)\s+(?:from|out of|in)\s+{_MEMORY}$", re.IGNORECASE | re.DOTALL)
# A leading "I told you (that)" inside the topic says nothing about the topic.
_REPORTED = re.compile(rf"^(?:i\s+(?:ever\s+|once\s+)?{_SAID}\s+(?:to you\s+|you\s+)?(?:that\s+|about\s+)?)", re.I)

# Topics that make the sentence an idiom ("forget it", "forget I asked"), not a request.
_NOT_TOPICS = {
    "it",
    "this",
    "that",
    "them",
    "those",
    "these",
    "everything",
    "anything",
    "all",
    "all of it",
    "all of that",
    "all this",
    "all that",
    "me",
    "him",
    "her",
    "you",
    "i asked",
    "i said anything",
    "i said that",
    "i said it",
    "i mentioned it",
    "i asked you",
    "i ever asked",
    "i ever said that",
    "i'm here",
    "i am here",
}


def parse_deletion_request(text: str) -> DeletionSelection | None:
    """The selection a chat message asks to delete, or None for an ordinary message."""
    if not isinstance(text, str) or len(text) > MAX_REQUEST_CHARS or "\n" in text.strip():
        return None
    head = _HEAD.match(" ".join(text.split()))
    if head is None:
        return None
    verb = head["verb"].lower()
    rest = _strip_tail(head["rest"])
    if not rest:
        return None

    numbered = _NUMBERED.match(rest)
    if numbered:
        seqs = tuple(sorted({int(n) for n in re.findall(r"\d+", numbered["nums"])}))
        return DeletionSelection(kind="seqs", seqs=seqs)

    quoted = _QUOTED.search(rest)
    if quoted:
        phrase = next(g for g in quoted.groups() if g is not None).strip()
        if phrase and _BEFORE_QUOTE.match(rest[: quoted.start()]) and not _strip_tail(rest[quoted.end() :]).strip():
            # A quoted identifier is matched as one; a quoted phrase, word for word.
            kind = "identifier" if _names_an_identifier_alone(phrase, words=frozenset()) else "exact"
            return DeletionSelection(kind=kind, text=phrase)
        return None
    if _names_an_identifier_alone(rest):
        return DeletionSelection(kind="identifier", text=rest)

    containing = _CONTAINING.match(rest)
    if containing:
        return _selection("exact", containing["topic"])

    patterns = list(_SEMANTIC)
    if verb == "forget":
        patterns += _FORGET_ONLY
    for pattern in patterns:
        found = pattern.match(rest)
        if found:
            return _selection("semantic", found["topic"])
    found = _MY_OBJECT.match(head["rest"].strip().rstrip(".!?"))
    if found:
        return _selection("semantic", found["topic"])
    return None


def _strip_end_punct(text: str) -> str:
    """`text` without trailing whitespace and . ! ? (a loop, linear in the length)."""
    end = len(text)
    while end and (text[end - 1].isspace() or text[end - 1] in _END_CHARS):
        end -= 1
    return text[:end]


def _strip_tail(text: str) -> str:
    """`text` without trailing filler ("..., from your memory please.").

    Each step removes one phrase of `_TAIL_PHRASES` that ends the text and
    starts a word, with the spaces and at most one comma or semicolon before
    it; each step shortens the text, and a step costs a bounded number of
    comparisons, so the whole strip is linear in the length.
    """
    text = _strip_end_punct(text.strip())
    end = len(text)
    while end:
        phrase = next((p for p in _TAIL_PHRASES if text[max(end - len(p), 0) : end].lower() == p), None)
        start = end - len(phrase) if phrase else 0
        if phrase is None or (start and not (text[start - 1].isspace() or text[start - 1] in ",;")):
            break
        end = len(text[:start].rstrip())
        if end and text[end - 1] in ",;":
            end = len(text[: end - 1].rstrip())
    return _strip_end_punct(text[:end]).strip()


# Words that may stand beside an identifier named alone: what it is, and whose.
_IDENTIFIER_WORDS_SAID = (
    "a an the my our your his her their old former previous current new other work personal private "
    "e-mail email mail address addresses phone telephone mobile cell number numbers no key keys api "
    "secret token tokens password passcode id ids iban account bank card credit debit url link website "
    "site web page handle username user name code reference and or also plus that this is was are were "
)
_IDENTIFIER_WORDS = frozenset(_IDENTIFIER_WORDS_SAID.split())
_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")
# A person's or a place's name, one to three capitalised words: "Ana", "Ana Kim".
_NAME = re.compile(r"[A-Z][^\W\d_]*(?:[ -][A-Z][^\W\d_]*){0,2}")


def _names_an_identifier_alone(rest: str, words: frozenset[str] = _IDENTIFIER_WORDS) -> bool:
    """Whether `rest` names identifiers and says nothing else but `words` ("my e-mail dana@example.org")."""
    named = identifiers_in(rest)
    if not named:
        return False
    left = normalized(rest)
    for identifier in named:
        left = left.replace(identifier.surface, " ")
    return all(word.casefold() in words for word in _WORD.findall(left))


def _selection(kind: str, topic: str) -> DeletionSelection | None:
    topic = _strip_tail(topic)
    if identifiers_in(topic):
        # A named identifier is what the request means, whatever the words around it.
        return DeletionSelection(kind="identifier", text=topic)
    if kind == "semantic":
        reported = _REPORTED.sub("", topic).strip()
        topic = reported or topic
    if topic.lower() in _NOT_TOPICS or len(topic) < 2:
        return None
    return DeletionSelection(kind=kind, text=topic)


def resolve_deletion_request(*, owner: User, text: str) -> dict[str, Any]:
    """`deletion_preview` keyword arguments for a natural-language request.

    Raises ValidationFailed when the text is no deletion request, NotFound
    when it names a message number the owner does not have.
    """
    selection = parse_deletion_request(text)
    if selection is None:
        raise ValidationFailed(
            "This does not read as a deletion request; try “forget that …”, “delete message 12” "
            "or “delete \u201cexact words\u201d”.",
            fields={"request": "not a deletion request"},
        )
    if selection.kind == "seqs":
        return {"ids": message_ids_by_seq(owner=owner, seqs=list(selection.seqs))}
    if selection.kind == "semantic":
        # Decided by words before meaning: a subject named as a whole, or a name (a whole word, so "Ana"
        # is never "Anastasia"); a short topic is too little for a similarity to tell apart.
        subject = topic_subject(selection.text)
        if subject is not None:
            return {"subject": subject}
        if _NAME.fullmatch(selection.text):
            return {"words": selection.text}
    return {selection.kind: selection.text}
