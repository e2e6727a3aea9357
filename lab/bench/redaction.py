"""One deletion preview's redactions in the worst case.

A throwaway user holds 50 user messages of 20,000 characters (the most a
message may have, and the most a preview considers); a semantic selection
with a 20,000-character query and threshold -1 matches all of them. Each
message is sentences of clauses of words no query word shares a stem with,
but one clause in ten holds a query word, so every message is scanned to the
end and has a redaction on offer (the rules; no model). Timed: the whole
`deletion_preview` with the configured caps (DELLM_REDACTION_MAX_MESSAGES,
DELLM_REDACTION_MAX_CHARS), the same with the caps lifted to all 50
messages, and the matching alone (`Matcher`, built once, over the 50 texts).
The matching this replaced took 4-5 s per message on the same input.
"""

import statistics
import string
import time
import uuid
from typing import Any

import numpy as np
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test.utils import override_settings

from chat.index.embeddings import get_embedder
from chat.models import Thread
from chat.writer import message_store
from lab.bench.seed import owner_drop
from provenance.deletions.preview import deletion_preview
from provenance.deletions.redaction import Matcher

USERNAME_PREFIX = "redactbench-"
MESSAGES = 50
CHARS = 20_000


def _words(rng: np.random.Generator, first: str, n: int) -> list[str]:
    """Five-letter words starting with `first`: two vocabularies that share no stem."""
    letters = list(string.ascii_lowercase)
    return [first + "".join(rng.choice(letters, size=4)) for _ in range(n)]


def _text(words: list[str], chars: int) -> str:
    return " ".join(words)[:chars].rstrip()


def _message(rng: np.random.Generator, query_words: list[str], chars: int) -> str:
    clauses = []
    # More than enough clauses (about 25 characters each), cut to exactly `chars`.
    for n in range(chars // 20):
        clause = _words(rng, "m", 4)
        if n % 10 == 0:
            clause[2] = str(rng.choice(query_words))
        clauses.append(" ".join(clause))
    sentences = [", ".join(clauses[i : i + 5]) + "." for i in range(0, len(clauses), 5)]
    return " ".join(sentences)[:chars]


def _timed(runs: int, call) -> dict[str, float]:
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - started)
    return {"p50": statistics.median(seconds), "max": max(seconds), "n": runs}


def redaction_bench(*, messages: int = MESSAGES, chars: int = CHARS, runs: int = 3, seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    query_words = _words(rng, "q", chars // 6)
    query = _text(query_words, chars)
    texts = [_message(rng, query_words, chars) for _ in range(messages)]
    assert all(len(text) == chars for text in texts)
    owner = get_user_model().objects.create_user(username=f"{USERNAME_PREFIX}{uuid.uuid4().hex[:8]}")
    try:
        thread = Thread.objects.create(owner=owner, title="redaction bench")
        for text, vector in zip(texts, get_embedder().embed(texts), strict=True):
            message_store(owner_id=owner.pk, thread_id=thread.pk, role="user", content=text, embedding=vector)

        def preview() -> Any:
            return deletion_preview(owner=owner, actor=owner, mode="soft", semantic=query, threshold=-1.0)

        capped = preview()
        capped_row = {
            "matched": len(capped.matched_ids),
            "proposals": len(capped.redaction_proposals),
            "unscanned": len(capped.redactions_unscanned),
            "seconds": _timed(runs, preview),
        }
        with override_settings(DELLM_REDACTION_MAX_MESSAGES=messages, DELLM_REDACTION_MAX_CHARS=messages * chars):
            uncapped = preview()
            uncapped_row = {
                "matched": len(uncapped.matched_ids),
                "proposals": len(uncapped.redaction_proposals),
                "unscanned": len(uncapped.redactions_unscanned),
                "seconds": _timed(runs, preview),
            }

        def matching() -> None:
            matcher = Matcher(semantic=query)
            for text in texts:
                matcher.redact(text)

        matching_row = _timed(runs, matching)
    finally:
        owner_drop(owner.pk)
    return {
        "messages": messages,
        "chars": chars,
        "query_chars": len(query),
        "caps": {"messages": settings.DELLM_REDACTION_MAX_MESSAGES, "chars": settings.DELLM_REDACTION_MAX_CHARS},
        "capped": capped_row,
        "uncapped": uncapped_row,
        "matching": matching_row,
    }
