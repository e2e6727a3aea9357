"""Hybrid context retrieval (chat/retrieval/fused.py) through `context_retrieve`, as a turn calls it."""

import pytest
from django.conf import settings
from django.db import connection

from chat.models import Message
from chat.partitions import is_partitioned, partition_index
from chat.retrieval.context import context_retrieve
from chat.retrieval.fused import CONTEXT_WEIGHT, LEXICAL_FLOOR, lexical_matches
from chat.retrieval.neighbours import NEIGHBOUR_MODES
from chat.retrieval.terms import OWNER_SEARCH, query_terms
from tests.factories import make_message, make_thread, make_tool_steps, unit_vector

FILLER = [
    "The weather was grey all day.",
    "I cooked pasta for dinner yesterday.",
    "The train was late again this morning.",
    "I finished a long novel last night.",
]


def retrieve(message: Message, policy: str = "relevant", **extra) -> list[tuple[str, str]]:
    """(content, signal) of the context, most relevant first."""
    items = context_retrieve(message=message, policy=policy, k=5, threshold=0.2, window=10, **extra)
    return [(item.content, item.signal) for item in items]


@pytest.fixture
def history(thread):
    """Facts and filler with unrelated random vectors: only words can find them.

    Each in a conversation of its own: a message is indexed with the turn
    before it (chat/index/context.py), and these statements follow nothing.
    """
    made = {
        "dog": make_message(make_thread(thread.owner), "My dog Rex chewed the sofa again.", embedding=unit_vector(1)),
        "job": make_message(
            make_thread(thread.owner), "Long shift at the hospital, I work nights now.", embedding=unit_vector(2)
        ),
    }
    for i, text in enumerate(FILLER):
        make_message(make_thread(thread.owner), text, embedding=unit_vector(10 + i))
    return made


def test_words_are_ored_not_anded(thread, history):
    # No message holds both words: an AND query (plainto_tsquery) finds
    # nothing. Equal weights: the shorter message ranks first (BM25's length norm).
    question = make_message(thread, "What about Rex and the hospital?", embedding=unit_vector(99))
    assert retrieve(question) == [
        ("My dog Rex chewed the sofa again.", "lexical"),
        ("Long shift at the hospital, I work nights now.", "lexical"),
    ]


def test_an_elliptical_reply_is_found_by_the_turn_it_follows_below_own_words(owner, history):
    talk = make_thread(owner)
    make_message(talk, "Did you see the fireworks over the harbour?", embedding=unit_vector(60))
    reply = make_message(talk, "Yes, it was amazing!", role="assistant", embedding=unit_vector(61))
    told = make_message(make_thread(owner), "The harbour fireworks were loud.", embedding=unit_vector(62))
    question = make_message(make_thread(owner), "What about the harbour fireworks?", embedding=unit_vector(95))
    # The reply holds "harbour" and "fireworks" in its context only (weight 'B'): they count
    # CONTEXT_WEIGHT of their IDF, so it ranks below the messages whose own words they are...
    assert [content for content, _ in retrieve(question, policy="lexical", lexical_floor=0.1)] == [
        told.content,
        "Did you see the fireworks over the harbour?",
        reply.content,
    ]
    # ... and below the default floor on words alone (docs/RETRIEVAL.md, "Conversational context").
    assert CONTEXT_WEIGHT < LEXICAL_FLOOR
    # (Neighbours off: a matched question brings its reply by position, chat/retrieval/fused.py NEIGHBOURS.)
    assert reply.content not in [content for content, _ in retrieve(question, policy="lexical", neighbours="none")]


def test_a_similar_vector_and_shared_words_are_both(thread, history):
    question = make_message(thread, "Has Rex calmed down?", embedding=unit_vector(1))
    assert retrieve(question) == [("My dog Rex chewed the sofa again.", "both")]


def test_similar_meaning_without_shared_words_is_vector(thread, history):
    question = make_message(thread, "How is my pet doing?", embedding=unit_vector(1))
    assert retrieve(question) == [("My dog Rex chewed the sofa again.", "vector")]


def test_unrelated_question_gets_an_empty_context(thread, history):
    # "what", "my", "is" are stop words; "favourite" and "colour" appear nowhere.
    question = make_message(thread, "What is my favourite colour?", embedding=unit_vector(98))
    assert retrieve(question) == []


def test_a_word_shared_by_most_messages_does_not_carry_a_match(thread, history):
    for i in range(6):
        make_message(thread, f"Lunch was nice today, number {i}.", embedding=unit_vector(30 + i))
    # "today" is in 6 of 13 messages: low IDF; "sofa" in one: the share of
    # the question's weight a "today"-only message matches stays under the floor.
    question = make_message(thread, "Did anything happen to the sofa today?", embedding=unit_vector(97))
    assert retrieve(question) == [("My dog Rex chewed the sofa again.", "lexical")]


def test_words_only_past_questions_hold_do_not_count_against_a_statement(owner, thread, history):
    """A question states no fact: the floor's whole is the weight of the words some statement holds."""
    make_message(make_thread(owner), "What is the name of Kira's cat?", embedding=unit_vector(60))
    # "name" and "kira" are as rare as "dog": against all three, the statement's "dog" is a third, under the floor.
    question = make_message(thread, "What is the name of Kira's dog?", embedding=unit_vector(95))
    assert ("My dog Rex chewed the sofa again.", "lexical") in retrieve(question, neighbours="none")
    terms = query_terms(owner_id=owner.pk, text=question.content, exclude_id=question.pk)
    found, _ = lexical_matches(owner_id=owner.pk, terms=terms, exclude={question.pk}, floor=LEXICAL_FLOOR)
    assert history["dog"].pk in found


def test_policies_use_one_signal_each(thread, history):
    question = make_message(thread, "What about Rex?", embedding=unit_vector(2))
    assert retrieve(question, policy="vector") == [("Long shift at the hospital, I work nights now.", "vector")]
    assert retrieve(question, policy="lexical") == [("My dog Rex chewed the sofa again.", "lexical")]
    # Each is first in its own signal's ranking: a tie in the fusion, newer first.
    assert retrieve(question, policy="relevant") == [
        ("Long shift at the hospital, I work nights now.", "vector"),
        ("My dog Rex chewed the sofa again.", "lexical"),
    ]


def test_a_statement_ranks_above_a_past_question_that_matches_as_well(thread, history):
    make_message(thread, "Where did Rex sleep last night?", embedding=unit_vector(50))
    question = make_message(thread, "Tell me about Rex.", embedding=unit_vector(96))
    assert [content for content, _ in retrieve(question)] == [
        "My dog Rex chewed the sofa again.",
        "Where did Rex sleep last night?",
    ]


def test_a_past_question_nobody_answered_ranks_below_one_that_was_answered(owner, history):
    """A question's worth is its answer: with no live message after it (no reply, or a removed one) it counts less."""
    answered = make_message(make_thread(owner), "Did Rex sleep last night?", embedding=unit_vector(50))
    reply = make_message(answered.thread, "Yes, on the sofa.", role="assistant", embedding=unit_vector(51))
    unanswered = make_message(make_thread(owner), "Where did Rex sleep last night?", embedding=unit_vector(52))
    question = make_message(make_thread(owner), "Rex sleep last night", embedding=unit_vector(96))
    ranked = [content for content, _ in retrieve(question, neighbours="none")]
    assert ranked.index(answered.content) < ranked.index(unanswered.content)

    # Its reply removed, the answered question counts as little as the other; the newer first on a tie.
    reply.status = Message.Status.DELETED
    reply.save(update_fields=["status"])
    ranked = [content for content, _ in retrieve(question, neighbours="none")]
    assert ranked.index(unanswered.content) < ranked.index(answered.content)


def test_other_owners_and_removed_messages_never_match(thread, history, other_owner):
    make_message(make_thread(other_owner), "Rex is my neighbour's dog.", embedding=unit_vector(1))
    Message.objects.filter(pk=history["job"].pk).update(status=Message.Status.DELETED)
    question = make_message(thread, "Rex and the hospital?", embedding=unit_vector(2))
    assert retrieve(question) == [("My dog Rex chewed the sofa again.", "lexical")]


@pytest.mark.parametrize(
    "text",
    [
        "Rex' | !hospital & (sofa <-> ':*",
        "'); DROP TABLE chat_message; -- rex",
        "rex\\ \\' hospital:* <2> !!",
        "a" * 5000 + " rex",
    ],
)
def test_query_syntax_in_the_question_is_only_words(thread, history, text):
    question = make_message(thread, text, embedding=unit_vector(95))
    found = {content for content, _ in retrieve(question)}
    assert "My dog Rex chewed the sofa again." in found
    assert Message.objects.filter(owner=thread.owner).count() == 7


def test_query_terms_are_found_alphanumeric_lexemes_only(owner, thread, history):
    # "user@example.com" is one email lexeme (not alphanumeric: dropped);
    # "2024" and "fig" are in no message (nothing to weigh).
    terms = query_terms(owner_id=owner.pk, text="Rex, the sofa and the weather: user@example.com 2024 fig?")
    assert terms.lexemes == ["rex", "sofa", "weather"]
    assert terms.idf[0] == terms.idf[1] == terms.idf[2] > 0


def test_a_message_without_embedding_still_finds_words(thread, history):
    question = make_message(thread, "Rex?")
    assert retrieve(question) == [("My dog Rex chewed the sofa again.", "lexical")]
    assert retrieve(question, policy="vector") == []


def test_the_owner_index_serves_the_full_text_side(owner, thread, history):
    # The migration's expression must be the query's, or the planner ignores the index (each partition's copy).
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(
            f"EXPLAIN SELECT id FROM chat_message WHERE {OWNER_SEARCH} @@ %s::tsquery", [f"'#{owner.pk}' & 'rex'"]
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert partition_index(table="chat_message", index="message_owner_search_gin", owner_id=owner.pk) in plan


def test_the_owner_index_keeps_a_pending_list_every_scan_can_afford_on_every_partition(db):
    # Every scan reads the unmerged entries whole: at most 64 kB of them (8 pages), so a burst of writes
    # (a purge's recompute) merges in batches without making each turn's look-up read megabytes (migration 0019).
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.relname, i.reloptions FROM pg_class i WHERE i.relname = 'message_owner_search_gin' "
            "OR i.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'message_owner_search_gin'::regclass)"
        )
        options = dict(cursor.fetchall())
    assert len(options) == 1 + (settings.DELLM_PARTITIONS if is_partitioned("chat_message") else 0)
    assert {name: sorted(value or []) for name, value in options.items()} == {
        name: ["fastupdate=on", "gin_pending_list_limit=64"] for name in options
    }


@pytest.mark.parametrize("policy", ["relevant", "vector", "lexical", "window", "full"])
def test_a_system_prompt_is_never_retrieved(thread, history, policy):
    # Same words and the very same vector as the question: under every policy, still no memory.
    make_message(thread, "My dog Rex is a beagle.", role="system", embedding=unit_vector(7))
    question = make_message(thread, "Is my dog Rex a beagle?", embedding=unit_vector(7))
    context = retrieve(question, policy=policy)
    assert all("beagle" not in content for content, _ in context)
    if policy in ("relevant", "lexical", "window", "full"):
        assert ("My dog Rex chewed the sofa again.", "" if policy in ("window", "full") else "lexical") in context


def test_a_system_prompt_is_no_lexical_neighbour(owner, thread, history):
    prompt = make_message(thread, "My dog Rex is a beagle.", role="system")
    terms = query_terms(owner_id=owner.pk, text="dog Rex beagle")
    assert lexical_matches(owner_id=owner.pk, terms=terms, exclude=set(), floor=0.1)[0] == {history["dog"].pk}
    assert prompt.pk not in lexical_matches(owner_id=owner.pk, terms=terms, exclude=set(), floor=0.0)[0]


@pytest.mark.parametrize(
    ("policy", "neighbours"),
    [
        *((policy, mode) for policy in ("relevant", "vector", "lexical") for mode in NEIGHBOUR_MODES),
        ("window", None),
        ("full", None),
    ],
)
def test_a_tool_steps_words_never_bring_it_into_a_context(owner, policy, neighbours):
    steps = make_tool_steps(
        make_thread(owner),
        question="What is the weather in Grenoble?",
        arguments='{"station": "Quokkaberg"}',
        result="Quokkaberg station: zorblax hail",
        answer="Hail is expected in Grenoble.",
    )
    asked = make_message(make_thread(owner), "Quokkaberg zorblax weather?", embedding=unit_vector(5))
    # Never embedded at any door; given the question's own vector here, so that the similarity side's own filter
    # is what keeps them out, as the full-text side's keeps out the words they are indexed by.
    Message.objects.filter(pk__in=[steps["call"].pk, steps["result"].pk]).update(
        embedding=asked.embedding, embedding_model=asked.embedding_model
    )

    # Any cosine passes, any shared word too.
    items = context_retrieve(
        message=asked, policy=policy, k=10, threshold=-1.0, window=10, lexical_floor=0.01, neighbours=neighbours
    )

    # The question and its answer are found by "weather" (the answer's index holds the turn it follows), by
    # similarity or by position; the answer is the question's next neighbour too, past the tool steps. The tool
    # steps are found by nothing.
    assert sorted(item.id for item in items) == sorted([steps["question"].pk, steps["answer"].pk])
