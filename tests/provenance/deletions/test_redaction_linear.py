"""Redaction matching is linear in len(text) + len(query).

The technique of the request parser's test (tests/provenance/deletions/test_forget_phrases_linear.py):
Hypothesis composes adversarial input from the pieces of the rules' own
grammar, plus the exact reproducers. Here the cost is counted, not timed, so
the bound is exact on any machine: a step is one bytecode the interpreter
runs (`sys.settrace` opcode events) or one comparison of two words. Words are
made a `str` whose `==` is Python code, so the comparisons C does on our
behalf (list equality, set and dict lookups) are counted too. The matching
this replaced compared every token with every query word: about 4 s for a
20,000-character query against one 20,000-character message.
"""

import random
import string
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provenance.deletions import redaction
from provenance.deletions.redaction import redact_text

# Steps per character of text plus query. The linear code takes 16 to 110 on
# the reproducers below, the same at 2,000 and 4,000 characters (most on
# "a, a, a, ...": a token and a clause every 1.5 characters); comparing every
# token with every word takes about 600 at 4,000, and four times the steps
# for twice the input.
STEPS_PER_CHAR = 200
FIXED_STEPS = 2_000

# Pieces of the rules' grammar: clause and sentence separators, subjects,
# stop words, words that share a stem (or almost), quotes and dashes of words.
PIECES = [
    " ", ", ", "; ", ". ", "! ", "? ", " and ", " but ", "I ", "we ", "she ", "the ", "a ", "in ", "that ",
    "live ", "lives ", "living ", "liver ", "Paris ", "paris ", "pari ", "nurse ", "nurses ", "tea ",
    "b ", "ab ", "a-b ", "I'm ", "I’m ", "'", "’", "_ ", "1 ", "12 ", "x",
]  # fmt: skip


class _Word(str):
    """A word whose comparisons are counted (a Python `__eq__`)."""

    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return str.__ne__(self, other)


@pytest.fixture(autouse=True)
def _counted_words(monkeypatch):
    word = redaction._Token.word.fget
    monkeypatch.setattr(redaction._Token, "word", property(lambda token: _Word(word(token))))


def _steps(**select: str) -> int:
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        frame.f_trace_opcodes = True
        if event == "opcode":
            count += 1
        return tracer

    before = sys.gettrace()
    sys.settrace(tracer)
    try:
        redact_text(**select)
    finally:
        sys.settrace(before)
    return count


def _bound(text: str, query: str) -> int:
    return STEPS_PER_CHAR * (len(text) + len(query)) + FIXED_STEPS


def _random_words(seed: int, chars: int) -> str:
    """Distinct-looking words that share no stem with each other's text: every comparison fails."""
    rng = random.Random(seed)
    words = ("".join(rng.choice(string.ascii_lowercase) for _ in range(5)) for _ in range(chars // 6 + 1))
    return " ".join(words)[:chars]


def _reproducers(chars: int) -> list[dict[str, str]]:
    """The issue's semantic case, its exact cousin, and phrases that almost match everywhere."""
    half = chars // 2
    return [
        {"text": _random_words(1, chars), "semantic": _random_words(2, chars)},
        {"text": _random_words(1, chars), "exact": _random_words(2, chars)},
        {"text": "a " * half, "exact": "a " * (half // 2) + "b"},
        {"text": "a " * half, "exact": "a " * (half // 2)},
        {"text": "a, " * (chars // 3), "exact": "a, " * (chars // 6)},
        {"text": "live and " * (chars // 9), "semantic": "lives " * (chars // 6)},
    ]


@pytest.mark.parametrize("case", range(6))
def test_redaction_reproducers_take_linear_steps(case):
    small, large = _reproducers(2_000)[case], _reproducers(4_000)[case]
    query = next(value for key, value in large.items() if key != "text")
    steps = _steps(**large)
    assert steps <= _bound(large["text"], query), steps
    # Twice the input, about twice the steps (quadratic work would be four times).
    assert steps <= 2.3 * _steps(**small)


# The grammar's pieces, and words of any stem (a query of many words is what
# comparing each token with each word fed on).
_INPUT = st.lists(
    st.one_of(st.sampled_from(PIECES), st.text(string.ascii_lowercase, min_size=1, max_size=6).map("{} ".format)),
    # Long enough for the word count to matter (Hypothesis favours short lists).
    min_size=100,
    max_size=400,
).map("".join)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_INPUT, _INPUT, st.sampled_from(["exact", "semantic"]))
def test_redaction_adversarial_input_takes_linear_steps(text: str, query: str, kind: str):
    assert _steps(text=text, **{kind: query}) <= _bound(text, query)
