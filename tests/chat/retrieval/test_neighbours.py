"""Neighbours within the k budget (chat/retrieval/fused.py, `neighbours_add`) through `context_retrieve`.

The lexical policy keeps these exact: only the cue shares the question's
own words, and the floor sits above CONTEXT_WEIGHT, so the reply (whose
index holds the cue's words as context, chat/index/context.py) can only
come in as the cue's neighbour.
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chat.llm import ContextItem
from chat.models import Message
from chat.retrieval.context import context_retrieve
from chat.retrieval.fused import CONTEXT_WEIGHT
from chat.retrieval.neighbours import NEIGHBOUR_MODES, neighbours_add
from tests.factories import make_message, make_thread, make_user

# Above CONTEXT_WEIGHT: a message matched by its previous turn's words alone stays out.
FLOOR = CONTEXT_WEIGHT + 0.1
FILLER = ["The weather was grey all day.", "I cooked pasta for dinner.", "The train was late again."]


def context(question: Message, neighbours: str, k: int = 5, policy: str = "lexical") -> list[str]:
    items = context_retrieve(
        message=question, policy=policy, k=k, threshold=0.2, window=0, lexical_floor=FLOOR, neighbours=neighbours
    )
    return [item.content for item in items]


@pytest.fixture
def chat(owner):
    """A cue that names the concert and the reply after it, which does not."""
    thread = make_thread(owner, "session 1")
    made = {
        "before": make_message(thread, "Hey, long time no see!", role="assistant"),
        "cue": make_message(thread, "Did you end up going to the jazz concert in Lisbon?"),
        "reply": make_message(thread, "Yeah, it was amazing!", role="assistant"),
        "after": make_message(thread, "Nice, glad you went.", role="user"),
    }
    for text in FILLER:
        make_message(thread, text)
    return made


@pytest.fixture
def question(owner):
    return make_message(make_thread(owner, "question"), "What did she think of the jazz concert in Lisbon?")


def test_without_neighbours_the_reply_is_missed(chat, question):
    assert context(question, "none") == ["Did you end up going to the jazz concert in Lisbon?"]


@pytest.mark.parametrize("mode", ["question", "next", "both"])
def test_a_matched_questions_reply_is_pulled_in(chat, question, mode):
    expected = ["Did you end up going to the jazz concert in Lisbon?", "Yeah, it was amazing!"]
    assert context(question, mode)[:2] == expected
    assert context(question, mode, k=2) == expected


def test_both_adds_the_turn_before_after_the_reply(chat, question):
    assert context(question, "both") == [
        "Did you end up going to the jazz concert in Lisbon?",
        "Yeah, it was amazing!",
        "Hey, long time no see!",
    ]


def test_question_mode_leaves_a_statement_alone(owner):
    thread = make_thread(owner)
    make_message(thread, "I went to the jazz concert in Lisbon.")
    make_message(thread, "I'll keep that in mind.", role="assistant")
    question = make_message(make_thread(owner), "When was the jazz concert in Lisbon?")
    assert context(question, "question") == ["I went to the jazz concert in Lisbon."]
    assert context(question, "next") == ["I went to the jazz concert in Lisbon.", "I'll keep that in mind."]


def test_the_budget_holds_the_neighbours(owner):
    # Three cues and their replies: with k = 4 the third cue gives way to the first two replies.
    thread = make_thread(owner)
    for city in ("Lisbon", "Porto", "Faro"):
        make_message(thread, f"Was the jazz concert in {city} good?")
        make_message(thread, f"Loved it, {city} rocks.", role="assistant")
    question = make_message(make_thread(owner), "Which jazz concert was good?")
    assert len(context(question, "none", k=4)) == 3
    got = context(question, "question", k=4)
    assert len(got) == 4
    assert sum(text.endswith("?") for text in got) == 2


def test_a_deleted_reply_is_never_replaced_nor_shown(chat, question):
    Message.objects.filter(pk=chat["reply"].pk).update(status=Message.Status.DELETED)
    assert context(question, "next") == ["Did you end up going to the jazz concert in Lisbon?"]
    assert context(question, "both") == [
        "Did you end up going to the jazz concert in Lisbon?",
        "Hey, long time no see!",
    ]


def test_a_rewrite_is_the_neighbour_where_it_is_shown(chat, question, owner):
    # The reply was rewritten: the rewrite stands at the reply's position, not after the thread's end.
    Message.objects.filter(pk=chat["reply"].pk).update(status=Message.Status.DELETED)
    thread = chat["cue"].thread
    last = make_message(thread, "See you soon?")
    make_message(thread, "It was wonderful, really.", role="assistant", place=chat["reply"].seq)
    assert context(question, "next") == [
        "Did you end up going to the jazz concert in Lisbon?",
        "It was wonderful, really.",
    ]
    # The thread's last message has nothing after it by position, though the rewrite came after it.
    item = ContextItem(id=last.id, seq=last.seq, role="user", content=last.content, score=0.0)
    assert neighbours_add(owner_id=owner.pk, items=[item], k=5, exclude_id=question.id, mode="next") == [item]


def test_system_and_tool_steps_are_skipped(owner):
    thread = make_thread(owner)
    make_message(thread, "Be brief.", role="system")
    cue = make_message(thread, "Is the jazz concert in Lisbon sold out?")
    make_message(thread, "", role="assistant", tool_calls=[{"id": "c1", "name": "lookup", "arguments": "{}"}])
    make_message(thread, "sold out: yes", role="tool", tool_call_id="c1")
    make_message(thread, "It is, sorry.", role="assistant")
    question = make_message(make_thread(owner), "Was the jazz concert in Lisbon sold out?")
    assert context(question, "both") == [cue.content, "It is, sorry."]


def test_the_question_itself_is_never_a_neighbour(owner):
    # The question follows a matching question in its own thread.
    thread = make_thread(owner)
    make_message(thread, "Did she like the jazz concert in Lisbon?")
    question = make_message(thread, "What did she think of the jazz concert in Lisbon?")
    assert context(question, "next") == ["Did she like the jazz concert in Lisbon?"]


def test_another_owners_thread_is_never_read(chat, question, other_owner):
    theirs = make_thread(other_owner)
    cue = make_message(theirs, "Did you go to the jazz concert in Lisbon?")
    make_message(theirs, "Their private reply.", role="assistant")
    assert context(question, "both") == [
        "Did you end up going to the jazz concert in Lisbon?",
        "Yeah, it was amazing!",
        "Hey, long time no see!",
    ]
    # Even handed another owner's match, the owner's lookup finds none of its neighbours.
    items = context_retrieve(
        message=make_message(theirs, "jazz concert Lisbon?"),
        policy="lexical",
        k=5,
        threshold=0.2,
        window=0,
        neighbours="none",
    )
    assert [item.content for item in items] == [cue.content]
    added = neighbours_add(owner_id=question.owner_id, items=items, k=5, exclude_id=question.id, mode="both")
    assert [item.content for item in added] == [cue.content]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    statuses=st.lists(st.sampled_from(["active", "active", "deleted", "expiring"]), min_size=2, max_size=9),
    k=st.integers(min_value=1, max_value=6),
    mode=st.sampled_from(NEIGHBOUR_MODES),
)
def test_neighbours_match_a_reference_and_never_exceed_k(db, statuses, k, mode):
    owner = make_user()
    thread = make_thread(owner)
    rows = [
        make_message(thread, f"Was the jazz concert number {i} good?" if i % 2 == 0 else f"Reply {i}.", status=s)
        for i, s in enumerate(statuses)
    ]
    question = make_message(make_thread(owner), "jazz concert good?")
    matches = context_retrieve(message=question, policy="lexical", k=k, threshold=0.2, window=0, neighbours="none")
    got = [item.id for item in neighbours_add(owner_id=owner.pk, items=matches, k=k, exclude_id=question.pk, mode=mode)]
    assert got == _reference([m.id for m in matches], rows, k, mode)
    assert len(got) <= k
    live = {m.id for m in rows if m.status in Message.LIVE}
    assert set(got) <= live


def _reference(matches: list[int], rows: list[Message], k: int, mode: str) -> list[int]:
    """The rule in words: rank order, each match then (by mode) its live next and previous turn, at most k."""
    at = {m.id: i for i, m in enumerate(rows)}

    def side(match: int, step: int) -> list[int]:
        j = at[match] + step
        return [rows[j].id] if 0 <= j < len(rows) and rows[j].status in Message.LIVE else []

    out: list[int] = []

    def take(ids: list[int]) -> None:
        for i in ids:
            if i not in out and len(out) < k:
                out.append(i)

    for match in matches[:k]:
        if len(out) >= k:
            break
        if match not in out:
            out.append(match)
        if mode in ("next", "both") or (mode == "question" and rows[at[match]].content.endswith("?")):
            take(side(match, 1))
        if mode == "both":
            take(side(match, -1))
    if mode == "fill":
        for match in matches[:k]:
            take(side(match, 1))
    return out


def test_neighbours_are_read_only_for_the_matches_that_may_take_one(chat, owner):
    def statements(items: list[ContextItem], mode: str) -> list[str]:
        with CaptureQueriesContext(connection) as queries:
            neighbours_add(owner_id=owner.pk, items=items, k=5, exclude_id=0, mode=mode)
        return [query["sql"] for query in queries.captured_queries]

    plain = [item_of(chat["before"]), item_of(chat["after"])]
    assert statements(plain, "question") == []
    (read,) = statements([*plain, item_of(chat["cue"])], "question")
    assert "SELECT m.id, -1" not in read
    assert f"'{{{chat['cue'].pk}}}'" in read
    (read,) = statements(plain, "both")
    assert "SELECT m.id, -1" in read


def item_of(message: Message) -> ContextItem:
    return ContextItem(id=message.pk, seq=message.seq, role=message.role, content=message.content, score=1.0)
