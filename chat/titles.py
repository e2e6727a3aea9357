"""Thread titles derived from the user's own words, and drawn again when those words go.

A thread the user did not name gets a short title from its first live user
message once its first reply has committed (`thread_title_set`, enqueued by
`chat.turns.tasks`). The title is a derivative of that message, like an
index: `Thread.title_sources` records the message it was drawn from, and a
deletion or an undo draws it again from what is live (`titles_rederive`,
called by `provenance/deletions/remove.py` and `undo.py` under the owner's
lock), else it becomes "" (the UI's "Untitled"). A title the user typed, an
import's or `/v1`'s fixed one has no sources and is never touched.
docs/subsystems/deletions.md, "Derived thread titles", has the rest.
"""

import logging
from collections.abc import Iterable

from django.db import transaction
from django.db.models import Q, Subquery
from django.db.models.functions import Coalesce

from chat.models import Message, Thread, Turn
from core.db.locks import owner_lock

logger = logging.getLogger(__name__)

TITLE_MAX_WORDS = 8
TITLE_MAX_CHARS = 60
# Said before the question, not about it: dropped from the start of a title.
_FILLER = frozenset(
    {"hi", "hey", "hello", "yo", "so", "ok", "okay", "well", "um", "uh", "please", "pls", "thanks", "dear"}
)
_FILLER_PAIRS = frozenset(
    {
        ("can", "you"),
        ("could", "you"),
        ("would", "you"),
        ("will", "you"),
        ("can", "u"),
        ("hi", "there"),
        ("hey", "there"),
    }
)
_SENTENCE_END = ".!?…"
# Never the last character of a title.
_TRAILING = ".,;:!?…-–—"


def _bare(word: str) -> str:
    return word.lower().strip(".,;:!?…")


# A title cut short ends where a phrase does: before the clause its last conjunction or comma opens, and never
# on a word that leads into the next one ("I live in Lisbon and work as a" is "I live in Lisbon").
_CONJUNCTIONS = frozenset({"and", "but", "or", "so", "because", "while", "then", "although", "though", "whereas"})
_LEADING = _CONJUNCTIONS | frozenset(
    {
        *("a", "an", "the", "this", "that", "these", "those", "my", "your", "his", "her", "our", "their", "its"),
        *("in", "on", "at", "to", "of", "for", "with", "from", "by", "about", "into", "near", "as", "like", "than"),
        *("if", "when", "where", "which", "who", "is", "are", "was", "were", "am", "be", "been", "have", "has"),
        *("had", "do", "does", "did", "will", "would", "can", "could", "should", "very", "not", "no", "i"),
    }
)
# Words a phrase before a clause break keeps at least, else the break is not used.
_PHRASE_MIN_WORDS = 3


def _whole_phrase(chosen: list[str]) -> list[str]:
    """The words of a cut title up to the end of its last whole phrase (the words as they were when none is)."""
    cut = len(chosen)
    for index in range(len(chosen) - 1, _PHRASE_MIN_WORDS - 1, -1):
        if _bare(chosen[index]) in _CONJUNCTIONS or chosen[index - 1][-1] in ",;:":
            cut = index
            break
    while cut and _bare(chosen[cut - 1]) in _LEADING:
        cut -= 1
    return chosen[:cut] or chosen


def title_derive(text: str) -> str:
    """A short title from a message's own words: its first sentence, leading filler dropped, capitalised.

    At most TITLE_MAX_WORDS words and TITLE_MAX_CHARS characters, cut at a word
    boundary, every word one of `text`'s (the last without its trailing
    punctuation, the first with its first letter capitalised); "" when
    nothing fits (no words, or a first word longer than the cap). Linear
    time: one pass over the words, no regular expression.
    """
    # (word, ends a sentence): a line's last word ends one too.
    words: list[tuple[str, bool]] = []
    for line in text.splitlines():
        parts = line.split()
        words.extend((word, index == len(parts) - 1 or word[-1] in _SENTENCE_END) for index, word in enumerate(parts))
    start = 0
    while start < len(words):
        if start + 1 < len(words) and (_bare(words[start][0]), _bare(words[start + 1][0])) in _FILLER_PAIRS:
            start += 2
        elif _bare(words[start][0]) in _FILLER:
            start += 1
        else:
            break
    if start == len(words):
        start = 0  # nothing but filler ("Hi!"): that is what was said
    chosen: list[str] = []
    length = -1
    finished = False
    for word, ends in words[start : start + TITLE_MAX_WORDS]:
        if length + 1 + len(word) > TITLE_MAX_CHARS:
            break
        chosen.append(word)
        length += 1 + len(word)
        if ends:
            finished = True
            break
    if not finished and start + len(chosen) < len(words):
        chosen = _whole_phrase(chosen)
    while chosen and not chosen[-1].rstrip(_TRAILING):
        chosen.pop()
    if not chosen:
        return ""
    chosen[-1] = chosen[-1].rstrip(_TRAILING)
    first = chosen[0][:1].upper()
    if len(first) == 1:  # "ß".upper() is two letters: then it stays as written
        chosen[0] = first + chosen[0][1:]
    return " ".join(chosen)


def _first_user_messages(*, owner_id: int, thread_ids: Iterable[int]) -> dict[int, tuple[int, str]]:
    """{thread id: (id, text) of its first live user message in the order the thread shows}."""
    rows = (
        Message.objects.filter(
            owner_id=owner_id, thread_id__in=sorted(set(thread_ids)), role=Message.Role.USER, status__in=Message.LIVE
        )
        .order_by("thread_id", Coalesce("place", "seq"), "seq")
        .distinct("thread_id")
        .values_list("thread_id", "pk", "content")
    )
    return {thread_id: (pk, content) for thread_id, pk, content in rows}


def _titles_draw(*, owner_id: int, threads: list[Thread]) -> list[int]:
    """Draw each thread's title from its first live user message, or ""; returns the threads that changed.

    Each update is conditional on the title it read, so a rename that lands meanwhile wins.
    """
    first = _first_user_messages(owner_id=owner_id, thread_ids=[thread.pk for thread in threads])
    changed = []
    for thread in threads:
        pk, text = first.get(thread.pk, (None, ""))
        title = title_derive(text)
        sources = [pk] if title and pk is not None else []
        if (title, sources) == (thread.title, list(thread.title_sources)):
            continue
        updated = Thread.objects.filter(
            owner_id=owner_id, pk=thread.pk, title=thread.title, title_sources=thread.title_sources
        ).update(title=title, title_sources=sources)
        if updated:
            changed.append(thread.pk)
    return changed


def thread_title_set(*, owner_id: int, thread_id: int) -> bool:
    """Give an untitled thread the title of its first live user message; True if it got one.

    Under the owner's lock, the one deletions take, so the message it is
    drawn from is live at commit and a deletion after it sees the sources.
    A thread with a title (the user's, an import's, `/v1`'s, a derived one)
    is left as it is.
    """
    with transaction.atomic():
        owner_lock(owner_id)
        threads = list(Thread.objects.filter(owner_id=owner_id, pk=thread_id, title="", title_sources=[]))
        return bool(threads) and bool(_titles_draw(owner_id=owner_id, threads=threads))


def titles_rederive(*, owner_id: int, message_ids: Iterable[int]) -> list[int]:
    """Draw again the titles built from, or missing in, the threads of `message_ids`; returns the threads changed.

    Caller holds the owner's lock, inside its transaction, after its status
    writes: a deletion's removed messages (a derived title one of them was a
    source of is drawn from the first surviving user message, else ""), an
    undo's restored and removed ones (the first message back gives its title
    back). Only derived titles and empty ones are drawn; a title with no
    sources that is not empty is the user's or an import's and stays.
    """
    ids = sorted(set(message_ids))
    if not ids:
        return []
    thread_ids = Message.objects.filter(owner_id=owner_id, pk__in=ids).values("thread_id")
    threads = list(
        Thread.objects.filter(owner_id=owner_id, pk__in=thread_ids).filter(Q(title="") | ~Q(title_sources=[]))
    )
    changed = _titles_draw(owner_id=owner_id, threads=threads)
    if changed:
        logger.info("titles drawn again for threads %s", changed)
    return changed


def turn_thread_untitled(*, owner_id: int, turn_id: int) -> int | None:
    """The thread of a done turn if it has no title yet (its first exchange just committed), else None.

    One statement, each table read in the owner's partition only.
    """
    question = Turn.objects.filter(owner_id=owner_id, pk=turn_id, status=Turn.Status.DONE).values("user_message_id")
    thread = Message.objects.filter(owner_id=owner_id, pk=Subquery(question)).values("thread_id")
    return (
        Thread.objects.filter(owner_id=owner_id, pk=Subquery(thread), title="", title_sources=[])
        .values_list("pk", flat=True)
        .first()
    )
