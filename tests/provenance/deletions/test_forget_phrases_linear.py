"""Regular expressions that see user input run in linear time.

Each parse is timed in CPU time of the calling thread, so a busy machine does
not make the test flaky; the bound is generous (a linear parse of 1,000
characters takes well under a millisecond), while the exponential pattern of
finding 1 took seconds at 60 of the 1,000 allowed characters.
"""

import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.logs import WithholdText
from provenance.deletions.forget_phrases import MAX_REQUEST_CHARS, parse_deletion_request

BOUND_S = 0.1

# Pieces of the parser's own grammar, the material backtracking feeds on.
PIECES = [
    " ",
    "  ",
    ",",
    ";",
    ".",
    "!",
    "?",
    ":",
    '"',
    "'",
    "“",
    "”",
    "‘",
    "’",
    "#",
    "&",
    "1",
    "12",
    "\n",
    "please",
    "pls",
    "thanks",
    "thank you",
    "for me",
    "for good",
    "forever",
    "now",
    "right now",
    "from",
    "out of",
    "in",
    "your",
    "my",
    "the",
    "memory",
    "memories",
    "history",
    "records",
    "messages",
    "forget",
    "delete",
    "remove",
    "that",
    "i",
    "said",
    "told you",
    "about",
    "everything",
    "what",
    "and",
    "can you",
    "could you",
    "go ahead and",
    "kindly",
    "containing",
    "with the words",
    "x",
    "a",
]


def _parse_seconds(text: str) -> float:
    start = time.thread_time()
    parse_deletion_request(text)
    return time.thread_time() - start


def _reproducers() -> list[str]:
    """The exact input of finding 1 at every n the length limit allows, and its cousins."""
    texts = []
    for tail in (" please", ", please", " from my memory", " now", ", thanks"):
        n = 1
        while len("forget" + tail * n + " x") <= MAX_REQUEST_CHARS:
            texts.append("forget" + tail * n + " x")
            n += 1
    longest = MAX_REQUEST_CHARS
    texts += [
        "forget " + "." * (longest - 9) + " x",
        "forget " + " " * (longest - 9) + "x",
        "forget my " + "a " * ((longest - 30) // 2) + "from my",
        "forget " + "'a" * ((longest - 7) // 2),
        'forget "' + "a" * (longest - 8),
        "forget " + "1, " * ((longest - 7) // 3),
        "forget " + "please " * ((longest - 10) // 7) + "x",
        "please " * ((longest - 8) // 7) + "forgot",
    ]
    return texts


def test_parse_deletion_request_reproducer_of_finding_1_is_linear():
    assert parse_deletion_request("forget" + " please" * 20 + " x") is None
    slowest = max(_reproducers(), key=_parse_seconds)
    assert _parse_seconds(slowest) < BOUND_S, (len(slowest), slowest[:40])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=400).map("".join), st.sampled_from(PIECES))
def test_parse_deletion_request_adversarial_input_is_linear(body: str, last: str):
    text = ("forget " + body)[: MAX_REQUEST_CHARS - len(last)] + last
    assert _parse_seconds(text) < BOUND_S


def test_log_filter_on_long_request_line_is_linear():
    import logging

    record = logging.LogRecord("django.server", logging.INFO, __file__, 1, '"%s" %s %s', None, None)
    record.args = ("GET /api/messages/?" + "?" * 20_000 + " HTTP/1.1", "200", "12")
    start = time.thread_time()
    WithholdText().filter(record)
    assert time.thread_time() - start < BOUND_S
    assert record.getMessage() == '"GET /api/messages/?[withheld] HTTP/1.1" 200 12'
