"""Thread titles are derived from the user's own words (chat/titles.py): set after the first exchange, never over
the user's title, drawn again when their source is deleted, given back by undo, and gone from the heap after a
purge."""

import ast
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chat import titles
from chat.models import Thread
from chat.threads import thread_create, thread_rename
from chat.titles import TITLE_MAX_CHARS, TITLE_MAX_WORDS, thread_title_set, title_derive
from chat.turns.start import turn_create
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview
from provenance.deletions.undo import deletion_undo
from provenance.erasure.registry import text_tables
from tests.factories import make_message, make_thread
from tests.helpers import heap_tuples, relation_files


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("Hi! Can you help me plan a trip to Lisbon in May? I like trams.", "Help me plan a trip to Lisbon"),
        # Cut short, a title ends at the end of a whole phrase, not on a word that leads into the next.
        ("I live in Lisbon and work as a nurse at the hospital.", "I live in Lisbon"),
        ("My sister, who lives in Porto with her two cats, visits", "My sister, who lives in Porto"),
        ("In the of the and a an to of for the end", "In the of the and a an to"),
        ("so what is the capital of Peru?", "What is the capital of Peru"),
        ("Please, could you explain monads", "Explain monads"),
        ("hey there\nmy bike has a flat tyre. what now?", "My bike has a flat tyre"),
        ("Hi!", "Hi"),
        ("  ", ""),
        ("recipe for bread...", "Recipe for bread"),
        ("x" * (TITLE_MAX_CHARS + 1) + " short", ""),
        ("ßtraße naming rules", "ßtraße naming rules"),
        ("Long " + "wordy " * 20, "Long " + " ".join(["wordy"] * (TITLE_MAX_WORDS - 1))),
    ],
)
def test_title_derive_takes_the_first_sentence_without_filler(text, title):
    assert title_derive(text) == title


_PUNCT = ".,;:!?…-–—"


_TOKENS = st.sampled_from(["hi", "so", "can", "you", "a", "bb", "x" * 30, ".", "!", " ", "\n", "ß", "é", "-"])


@given(st.lists(_TOKENS).map("".join))
def test_title_derive_is_short_and_made_of_the_source_words(text):
    _check(text, title_derive(text))


@given(st.text())
def test_title_derive_is_short_and_made_of_the_source_words_for_any_text(text):
    _check(text, title_derive(text))


def _check(text: str, title: str) -> None:
    assert len(title) <= TITLE_MAX_CHARS
    words = title.split()
    assert len(words) <= TITLE_MAX_WORDS
    source = text.split()
    for index, word in enumerate(words):
        candidates = {s.rstrip(_PUNCT) for s in source} | set(source) if index == len(words) - 1 else set(source)
        if index == 0:
            assert any(word == s or (word[1:] == s[1:] and word[:1] == s[:1].upper()) for s in candidates), word
        else:
            assert word in candidates, word
    assert title == title.strip()
    assert not title or title[-1] not in _PUNCT


def test_title_derive_uses_no_regular_expression():
    # Linear time by construction: one pass over the words; a regex could backtrack on hostile input.
    tree = ast.parse(Path(titles.__file__).read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not imported & {"re", "regex"}
    long = "hi so " * 100_000 + "tell me"
    assert title_derive(long) == "Tell me"


def _title(thread: Thread) -> tuple[str, list[int]]:
    thread.refresh_from_db()
    return thread.title, thread.title_sources


def test_a_new_thread_is_titled_after_its_first_exchange(owner, django_capture_on_commit_callbacks):
    thread = thread_create(owner=owner)
    with django_capture_on_commit_callbacks(execute=True):
        turn = turn_create(thread=thread, content="Hello, so I want to learn Portuguese before my trip. Tips?")
    turn.refresh_from_db()
    assert turn.reply_id is not None
    assert _title(thread) == ("I want to learn Portuguese before my trip", [turn.user_message_id])
    with django_capture_on_commit_callbacks(execute=True):
        turn_create(thread=thread, content="What about Spanish instead?")
    assert _title(thread) == ("I want to learn Portuguese before my trip", [turn.user_message_id])


def test_the_users_own_title_is_never_replaced(owner, django_capture_on_commit_callbacks):
    thread = thread_create(owner=owner, title="Languages")
    with django_capture_on_commit_callbacks(execute=True):
        turn = turn_create(thread=thread, content="I want to learn Portuguese")
    assert _title(thread) == ("Languages", [])
    first = make_message(make_thread(owner), "Teach me knitting")
    assert thread_title_set(owner_id=owner.pk, thread_id=first.thread_id)
    thread_rename(owner_id=owner.pk, thread_id=first.thread_id, title="Crafts")
    deletion = deletion_preview(owner=owner, actor=owner, ids=[first.pk, turn.user_message_id], mode="soft")
    deletion_confirm(deletion_id=deletion.pk, owner_id=owner.pk, confirmed_by=owner)
    assert _title(Thread.objects.get(pk=first.thread_id)) == ("Crafts", [])
    assert _title(thread) == ("Languages", [])


def test_deleting_the_source_draws_the_title_again_and_undo_gives_it_back(owner):
    thread = make_thread(owner)
    first = make_message(thread, "Hi, how do I prune roses?")
    make_message(thread, "Cut above an outward bud.", role="assistant")
    second = make_message(thread, "And what about tomatoes?")
    assert thread_title_set(owner_id=owner.pk, thread_id=thread.pk)
    assert _title(thread) == ("How do I prune roses", [first.pk])

    one = deletion_preview(owner=owner, actor=owner, ids=[first.pk], mode="soft")
    deletion_confirm(deletion_id=one.pk, owner_id=owner.pk, confirmed_by=owner)
    assert _title(thread) == ("And what about tomatoes", [second.pk])
    two = deletion_preview(owner=owner, actor=owner, ids=[second.pk], mode="soft")
    deletion_confirm(deletion_id=two.pk, owner_id=owner.pk, confirmed_by=owner)
    assert _title(thread) == ("", [])

    deletion_undo(deletion_id=two.pk, owner_id=owner.pk)
    assert _title(thread) == ("And what about tomatoes", [second.pk])
    deletion_undo(deletion_id=one.pk, owner_id=owner.pk)
    assert _title(thread) == ("How do I prune roses", [first.pk])


WORD = "Zorblequist"


@pytest.mark.django_db(transaction=True)
def test_a_purge_leaves_no_word_of_a_derived_title_in_the_thread_heap(owner):
    thread = make_thread(owner)
    source = make_message(thread, f"Tell me about {WORD} harbour ferries")
    make_message(thread, "Ferries run hourly.", role="assistant")
    assert "chat_thread" in text_tables()  # the purge's vacuum covers the titles' table
    assert thread_title_set(owner_id=owner.pk, thread_id=thread.pk)
    assert _title(thread) == (f"Tell me about {WORD} harbour ferries", [source.pk])
    # The test can see the word in the thread's heap before the purge.
    assert WORD.encode() in heap_tuples(relation_files(["chat_thread"])["chat_thread"])

    deletion = deletion_preview(owner=owner, actor=owner, ids=[source.pk], mode="purge")
    deletion_confirm(deletion_id=deletion.pk, owner_id=owner.pk, confirmed_by=owner)  # its VACUUM is eager here

    assert _title(thread) == ("", [])
    files = relation_files(["chat_thread", "chat_message"])
    # Case-insensitive: the search vectors hold the word as a lowercase lexeme.
    assert [name for name, data in files.items() if WORD.lower().encode() in heap_tuples(data).lower()] == []
