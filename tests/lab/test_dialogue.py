"""DIA, the two-speaker dialogue set (lab/evaluation/dialogue.py), and the memory metrics (memory_run.py)."""

import math
import re

import pytest

from chat.index.embeddings import get_embedder
from lab.evaluation.dialogue import CLASSES, EVENTS, NAMES, ROLES, WHEN, dialogue_generate
from lab.evaluation.memory import Conversation, Question, Turn
from lab.evaluation.memory_run import Setting, cascade_sizes, conversation_run, summarize


@pytest.fixture(scope="module")
def dialogues() -> list[Conversation]:
    return [dialogue_generate(seed=3, index=i, sessions=6) for i in range(4)]


def _positions(conversation: Conversation) -> tuple[list[Turn], dict[str, int], list[int]]:
    """The turns in order, {key: position} and each turn's session number."""
    turns = [turn for session in conversation.sessions for turn in session]
    sessions = [number for number, session in enumerate(conversation.sessions) for _ in session]
    return turns, {turn.key: i for i, turn in enumerate(turns) if turn.key}, sessions


def test_a_dialogue_depends_only_on_seed_and_index():
    assert dialogue_generate(seed=3, index=1, sessions=6) == dialogue_generate(seed=3, index=1, sessions=6)
    assert dialogue_generate(seed=3, index=1, sessions=6) != dialogue_generate(seed=3, index=2, sessions=6)


def test_sessions_are_dated_in_order(dialogues):
    for dialogue in dialogues:
        assert len(dialogue.dates) == len(dialogue.sessions) == 6
        assert dialogue.dates == sorted(dialogue.dates)
        assert len(set(dialogue.dates)) == 6


def test_every_evidence_key_is_exactly_one_turn_of_its_speaker(dialogues):
    for dialogue in dialogues:
        turns, _, _ = _positions(dialogue)
        keys = [turn.key for turn in turns if turn.key]
        assert len(keys) == len(set(keys))
        for question in dialogue.questions:
            for key in question.evidence + question.stale:
                assert keys.count(key) == 1
        # "s0-..." facts are the first speaker's (the user role), "s1-..." the second's.
        assert all(turn.role == ROLES[int(turn.key[1])] for turn in turns if turn.key)
        # Every question about a speaker names the same person.
        for s in (0, 1):
            asked = [q.text for q in dialogue.questions if q.evidence and q.evidence[0][1] == str(s)]
            names = {name for name in NAMES for text in asked if re.search(rf"\b{name}\b", text)}
            assert len(names) == 1


def test_a_next_turn_answer_is_the_reply_after_the_cue_that_names_it(dialogues):
    checked = 0
    for dialogue in dialogues:
        turns, at, sessions = _positions(dialogue)
        for question in (q for q in dialogue.questions if q.kind == "next_turn"):
            (key,) = question.evidence
            i = at[key]
            event = next(e for e in EVENTS if f"the {e}" in question.text)
            cue, answer = turns[i - 1], turns[i]
            assert sessions[i - 1] == sessions[i]
            assert event in cue.text and cue.role != answer.role and not cue.key
            # Elliptical: the answer names neither the event nor a place.
            assert event not in answer.text
            checked += 1
    assert checked == 4 * 4


def test_temporal_evidence_holds_the_time_and_an_elliptical_one_leans_on_the_cue(dialogues):
    for dialogue in dialogues:
        turns, at, _ = _positions(dialogue)
        for question in (q for q in dialogue.questions if q.kind == "temporal"):
            (key,) = question.evidence
            answer = turns[at[key]]
            assert any(when.lower() in answer.text.lower() for when in WHEN)
            if "-trip" in key:
                city = question.text.removeprefix("When did ").split(" go to ")[1].rstrip("?")
                assert city in turns[at[key] - 1].text and city not in answer.text
            else:
                what = question.text.split(" start ")[1].removesuffix(" classes?")
                assert what in answer.text


def test_an_updated_fact_replaces_one_stated_sessions_before(dialogues):
    for dialogue in dialogues:
        _, at, sessions = _positions(dialogue)
        updated = [q for q in dialogue.questions if q.kind == "updated"]
        assert len(updated) == 4
        for question in updated:
            ((latest,), (stale,)) = question.evidence, question.stale
            assert sessions[at[stale]] < sessions[at[latest]]


def test_no_answer_questions_are_about_nothing_said(dialogues):
    for dialogue in dialogues:
        turns, _, _ = _positions(dialogue)
        for question in (q for q in dialogue.questions if q.kind == "none"):
            assert question.evidence == ()
            event = next((e for e in EVENTS if f"the {e} in " in question.text), None)
            if event is not None:
                city = question.text.split(f"the {event} in ")[1].rstrip("?")
                assert not any(event in t.text and city in t.text for t in turns)
            else:
                what = next(c for c in CLASSES if f" start {c} classes" in question.text)
                assert not any(what in t.text for t in turns)


def _record(ranks: list[int | None], deps5: list[int], deps10: list[int], context: int = 5) -> dict:
    return {
        "conversation": "dia000",
        "kind": "k",
        "embedder": "e",
        "policy": "p",
        "evidence_ranks": ranks,
        "evidence": len(ranks),
        "context": context,
        "ms": 1.0,
        "dep@5": deps5,
        "dep@10": deps10,
    }


def test_recall_mrr_and_dep_are_exact_on_a_hand_made_case():
    records = [
        _record([1], [4], [6]),
        _record([None, 7], [2, 3], [2, 5]),
        _record([], [], [], context=3),  # a no-answer question: counted apart
    ]
    (row,) = summarize(records, lambda r: (r["policy"],))
    assert (row["questions"], row["no_answer"]) == (2, 1)
    assert row["recall@1"] == row["recall@3"] == row["recall@5"] == 0.5
    assert row["recall@10"] == 0.75
    assert math.isclose(row["mrr"], (1 + 1 / 7) / 2)
    assert row["dep@5"] == 3.0
    assert math.isclose(row["dep@10"], 13 / 3)
    assert row["unrelated@5_no_answer"] == 3.0


def test_a_cascade_counts_history_then_every_reply_whose_first_k_items_hold_it():
    history = {1: {1, 2}, 5: {5}}
    contexts = [[2, 9], [9, 5], [7, 8, 1]]
    assert cascade_sizes(history=history, contexts=contexts, k=2) == {1: 3, 5: 2}
    assert cascade_sizes(history=history, contexts=contexts, k=3) == {1: 4, 5: 2}


def test_conversation_run_ranks_the_evidence_and_counts_its_cascade(db):
    # One session: the statement, a chain reply (derives from it), filler; one question about the statement.
    conversation = Conversation(
        key="dia-test",
        sessions=[
            [
                Turn("user", "I went to the jazz concert in Lisbon.", key="e"),
                Turn("assistant", "Lovely!"),
                Turn("user", "The train was late again."),
            ]
        ],
        questions=[Question("Was the jazz concert in Lisbon good?", "next_turn", ("e",))],
    )
    records = conversation_run(
        conversation=conversation,
        embedder_name="test",
        embedder=get_embedder(),
        settings_list=[
            Setting(embedder="test", policy="lexical", threshold=0.2),
            Setting(embedder="test", policy="lexical", threshold=0.2, neighbours="next"),
        ],
        run_id="t",
    )
    assert [(r["policy"], r["evidence_ranks"], r["context"]) for r in records] == [
        ("lexical", [1], 1),
        ("lexical+next", [1], 2),
    ]
    # Dep(e) = e and the reply "Lovely!", plus the question's own reply (its context holds e).
    assert [r["dep@5"] for r in records] == [[3], [3]]


def test_a_fact_in_the_context_counts_for_the_message_it_was_drawn_from(db):
    conversation = Conversation(
        key="dia-facts",
        sessions=[[Turn("user", "I went to the jazz concert in Lisbon.", key="e"), Turn("assistant", "Lovely!")]],
        questions=[Question("Was the jazz concert in Lisbon good?", "next_turn", ("e",))],
    )
    records = conversation_run(
        conversation=conversation,
        embedder_name="test",
        embedder=get_embedder(),
        settings_list=[
            Setting(embedder="test", policy="lexical", threshold=0.2),
            Setting(embedder="test", policy="lexical", threshold=0.2, facts="replace"),
        ],
        run_id="t",
    )
    assert [(r["policy"], r["evidence_ranks"], r["context"], r["facts"]) for r in records] == [
        ("lexical", [1], 1, 0),
        # The fact took its source's place, and stands for it.
        ("lexical+facts:replace", [1], 1, 1),
    ]
    # With facts, Dep(e) holds the fact drawn from it too.
    assert [r["dep@5"] for r in records] == [[3], [4]]
