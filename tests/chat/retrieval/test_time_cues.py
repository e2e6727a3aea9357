"""Time: every message's real time, dates in the prompt, time in questions (chat/retrieval/time_cues.py)."""

import json
import time
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chat.imports.formats import parse_file
from chat.imports.history import history_import
from chat.llm import ContextItem, OpenAIResponder, build_prompt
from chat.models import Message
from chat.retrieval.context import context_retrieve
from chat.retrieval.time_cues import EARLIEST, LATEST, MAX_CHARS, Anchor, Period, time_cues
from tests.factories import make_message, unit_vector
from tests.helpers import FIXTURES

JSONL = b"""{"conversation": "trip", "role": "user", "content": "I like window seats.", "created_at": 1714557600}
{"conversation": "trip", "role": "assistant", "content": "Window seat noted.", "created_at": "2024-05-01T12:00:00"}
"""
DECEMBER = datetime(2023, 12, 1, 9, tzinfo=UTC)


def _day(year: int, month: int, day: int = 1) -> datetime:
    return datetime(year, month, day, tzinfo=UTC)


# --- Every message has a real time ----------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        (FIXTURES / "chatgpt_conversations.json").read_bytes(),
        (FIXTURES / "claude_conversations.json").read_bytes(),
        JSONL,
    ],
    ids=["chatgpt", "claude", "jsonl"],
)
def test_each_importer_keeps_the_sources_time_as_when_it_was_said(owner, data):
    parsed = parse_file(data)
    said = {m.source_id: m.created_at for c in parsed.conversations for m in c.messages}
    history_import(owner_id=owner.pk, parsed=parsed)
    stored = {m.source_id: m for m in Message.objects.filter(owner=owner)}
    assert {key: m.said_at for key, m in stored.items()} == said
    assert all(m.said_at != m.created_at for m in stored.values())


def test_dellms_export_carries_the_source_time_to_another_account(owner, other_owner, api):
    history_import(owner_id=owner.pk, parsed=parse_file(JSONL))
    export = b"".join(api.get("/api/export/").streaming_content)
    assert [m["said_at"] for m in json.loads(export)["messages"]] == ["2024-05-01T10:00:00Z", "2024-05-01T12:00:00Z"]
    history_import(owner_id=other_owner.pk, parsed=parse_file(export))
    assert [m.said_at for m in Message.objects.filter(owner=other_owner).order_by("seq")] == [
        datetime(2024, 5, 1, 10, tzinfo=UTC),
        datetime(2024, 5, 1, 12, tzinfo=UTC),
    ]


def test_a_message_said_here_is_said_when_the_server_stored_it(thread):
    message = make_message(thread, "hello")
    assert message.said_at == message.created_at


# --- The prompt shows each memory's date ----------------------------------------


def test_prompt_shows_each_memorys_date():
    item = ContextItem(id=7, seq=3, role="user", content="I live in Paris.", score=0.8, said_at=_day(2023, 5, 7))
    assert '<memory id="3" date="2023-05-07" role="user">\nI live in Paris.\n</memory>' in build_prompt([item], "?")


def test_the_openai_responders_prompt_dates_each_memory(openai_server):
    item = ContextItem(id=7, seq=3, role="user", content="I live in Paris.", score=0.8, said_at=_day(2023, 5, 7))
    OpenAIResponder().complete(context=[item], user_message="Where did I live in May?")
    [request] = openai_server.requests
    assert '<memory id="3" date="2023-05-07" role="user">' in request["body"]["messages"][1]["content"]


def test_retrieved_memories_come_with_when_they_were_said(thread):
    make_message(thread, "My dog Rex chewed the sofa.", embedding=unit_vector(1), source_created_at=_day(2023, 5, 7))
    question = make_message(thread, "What did Rex do?", embedding=unit_vector(99))
    [item] = context_retrieve(message=question, policy="relevant", k=5, threshold=0.2, window=0)
    assert item.said_at == _day(2023, 5, 7)
    assert 'date="2023-05-07"' in build_prompt([item], question.content)


# --- Time in questions ------------------------------------------------------------


def contents(question: Message) -> list[str]:
    return [
        item.content for item in context_retrieve(message=question, policy="relevant", k=5, threshold=0.2, window=0)
    ]


def test_a_when_question_surfaces_the_dated_evidence(thread):
    # Equal words; BM25 alone puts the shorter, undated one first.
    make_message(thread, "The concert was loud.", embedding=unit_vector(1))
    make_message(thread, "Two weeks ago we went to the concert downtown.", embedding=unit_vector(2))
    question = make_message(thread, "When was the concert?", embedding=unit_vector(99))
    assert contents(question) == ["Two weeks ago we went to the concert downtown.", "The concert was loud."]


def test_last_may_ranks_the_message_said_in_may_first(thread):
    # The same words: without time the newer (September) one wins the tie.
    make_message(thread, "The trip was fun.", embedding=unit_vector(1), source_created_at=_day(2023, 5, 10))
    make_message(thread, "The trip was fun.", embedding=unit_vector(2), source_created_at=_day(2023, 9, 10))
    question = make_message(
        thread, "What did I say about the trip last May?", embedding=unit_vector(99), source_created_at=DECEMBER
    )
    said = [
        item.said_at
        for item in context_retrieve(
            message=question, policy="relevant", k=5, threshold=0.2, window=0, lexical_floor=0.05
        )
    ]
    assert said == [_day(2023, 5, 10), _day(2023, 9, 10)]
    # At the default floor the September one stays out: its index holds no "May" (the date is indexed as
    # context, chat/index/context.py), which now weighs in the question's IDF mass.
    default = context_retrieve(message=question, policy="relevant", k=5, threshold=0.2, window=0)
    assert [item.said_at for item in default] == [_day(2023, 5, 10)]


def test_a_message_stating_the_period_ranks_first_too(thread):
    make_message(thread, "The trip to the coast was fun.", embedding=unit_vector(1))
    make_message(thread, "In May 2023 the trip to the coast was fun.", embedding=unit_vector(2))
    make_message(thread, "The trip to the coast was fun, and long.", embedding=unit_vector(3))
    # Asked in March 2024: "last year" is 2023, which the second message states (and no other word of it).
    question = make_message(
        thread, "How was the coast trip last year?", embedding=unit_vector(99), source_created_at=_day(2024, 3, 1)
    )
    assert contents(question)[0] == "In May 2023 the trip to the coast was fun."


GYM = {
    "before": ("The gym was fine.", _day(2023, 1, 9)),
    "move": ("I moved to Porto.", _day(2023, 3, 9)),
    "after": ("The gym was fine.", _day(2023, 6, 9)),
}


@pytest.mark.parametrize(
    ("question", "first", "other"),
    [("How was the gym before I moved?", "before", "after"), ("And the gym after the move?", "after", "before")],
)
def test_before_and_after_an_event_rank_what_was_said_then_first(thread, question, first, other):
    for i, text in enumerate(["The weather was grey.", "I cooked pasta.", "The train was late.", "I read a novel."]):
        make_message(thread, text, embedding=unit_vector(10 + i))
    # The one expected first is stored first: on words alone the later stored wins the tie.
    made = {
        key: make_message(thread, GYM[key][0], embedding=unit_vector(n), source_created_at=GYM[key][1])
        for n, key in enumerate([first, "move", other], 1)
    }
    asked = make_message(thread, question, embedding=unit_vector(99))
    items = context_retrieve(message=asked, policy="relevant", k=5, threshold=0.2, window=0)
    assert [item.id for item in items if item.id != made["move"].id] == [made[first].id, made[other].id]


@pytest.fixture
def moved(thread) -> list[str]:
    """A fact stated, then changed; the older statement is shorter (BM25 ranks it first on words alone)."""
    old = make_message(thread, "My flat is in Lisbon.", embedding=unit_vector(1), source_created_at=_day(2023, 1, 5))
    new = make_message(
        thread, "My flat is in Porto since the move.", embedding=unit_vector(2), source_created_at=_day(2023, 8, 5)
    )
    return [old.content, new.content]


def test_the_latest_statement_of_a_changed_fact_ranks_first(thread, moved):
    question = make_message(thread, "Where is my flat now?", embedding=unit_vector(99))
    assert contents(question) == [moved[1], moved[0]]


def test_without_asking_for_the_current_value_words_alone_decide(thread, moved):
    question = make_message(thread, "Where is my flat?", embedding=unit_vector(99))
    assert contents(question) == moved


# --- The question parser -----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "periods", "asks_when"),
    [
        ("What did I do last May?", [Period(_day(2023, 5), _day(2023, 6))], False),
        ("May I ask where I put my keys?", [], False),
        ("I may go to the gym.", [], False),
        ("On May 7 2022 we met.", [Period(_day(2022, 5, 7), _day(2022, 5, 8))], False),
        ("When did we move, in 2021?", [Period(_day(2021, 1), _day(2022, 1))], True),
        ("What did we do last summer?", [Period(_day(2023, 6), _day(2023, 9))], False),
        ("Last December was cold.", [Period(_day(2022, 12), _day(2023, 1))], False),
        ("yesterday", [Period(_day(2023, 11, 30), _day(2023, 12, 1))], False),
        ("Two weeks ago I quit.", [Period(_day(2023, 11, 14), _day(2023, 11, 21))], False),
        ("What date was the party?", [], True),
        ("What did I do before May?", [Period(EARLIEST, _day(2023, 5))], False),
        ("Where did I live after 2020?", [Period(_day(2021, 1), LATEST)], False),
    ],
)
def test_time_cues_read_periods_against_when_it_was_said(text, periods, asks_when):
    cues = time_cues(text, DECEMBER)
    assert (list(cues.periods), cues.asks_when) == (periods, asks_when)


def test_time_cues_name_the_event_a_question_is_placed_by():
    assert time_cues("What did I plan after the move?", DECEMBER).anchors == (Anchor("after", "the move"),)
    assert time_cues("Before I moved, where did I live?", DECEMBER).anchors == (Anchor("before", "i moved where"),)


def test_time_cues_tell_a_stated_time_and_a_question_for_the_current_value():
    assert time_cues("Last Monday I went to a salsa class.", DECEMBER).states_time
    assert not time_cues("I went to a salsa class.", DECEMBER).states_time
    assert time_cues("What's my current job?", DECEMBER).asks_current
    assert not time_cues("What's my job?", DECEMBER).asks_current


# Pieces of the grammar (what a backtracking matcher would feed on) and odd characters.
PIECES = [
    " ", "  ", ",", ".", "?", "-", "\n", "1", "7", "7th", "31", "2023", "1999", "may", "May", "last", "in", "on",
    "next", "summer", "fall", "week", "weeks", "days", "ago", "two", "a", "when", "what", "date", "how", "long",
    "yesterday", "now", "current", "monday", "weekend", "before", "after", "since", "é", "日", "_", "x", "²", "٢",
]  # fmt: skip
BOUND_S = 0.1


def _parse_seconds(text: str) -> float:
    start = time.thread_time()
    time_cues(text, DECEMBER)
    return time.thread_time() - start


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=800).map("".join))
def test_time_cues_adversarial_input_is_linear(text: str):
    # CPU time of this thread, generous: a linear read of 2,000 characters takes about a millisecond.
    assert _parse_seconds(text[:MAX_CHARS]) < BOUND_S


def test_time_cues_read_only_ascii_digits_as_numbers():
    assert time_cues("In ²⁰²³ and ٢٠٢٣, ² weeks ago, May ²", DECEMBER).periods == ()


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(st.text(max_size=200), st.lists(st.sampled_from(PIECES), max_size=40).map(" ".join)),
    st.datetimes(timezones=st.just(UTC)),
)
def test_time_cues_take_any_text_at_any_reference_time(text: str, ref: datetime):
    # An import may date a message in year 1 or 9999; a memory's own "last year" is read against it.
    cues = time_cues(text, ref)
    assert all(period.start < period.end for period in cues.periods)


def test_time_cues_read_at_most_max_chars():
    long = "last may " * 10_000
    assert len(time_cues(long, DECEMBER).periods) == len(time_cues(long[:MAX_CHARS], DECEMBER).periods)
    assert _parse_seconds(long) < BOUND_S
