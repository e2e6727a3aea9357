"""Matching a client's resent transcript to a thread's stored messages (assistant/transcript.py)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from assistant.openai.transcript import Said, ToolCall, completion_turn_start, thread_match, transcript_align
from chat.models import ContextEdge, Message, Thread
from tests.factories import make_message, make_thread


def said(*pairs: tuple[str, str]) -> list[Said]:
    return [Said(role=role, text=text) for role, text in pairs]


def history(thread: Thread, *pairs: tuple[str, str]) -> list[Message]:
    return [make_message(thread, text, role=role) for role, text in pairs]


EXCHANGE = (("user", "I have a red bike."), ("assistant", "Noted: I have a red bike."))


def test_removed_positions_are_dropped_whatever_the_replayed_text(owner):
    thread = make_thread(owner)
    stored = history(thread, *EXCHANGE, ("user", "Nice weather."), ("assistant", "Indeed."))
    Message.objects.filter(pk__in=[stored[0].pk, stored[1].pk]).update(status="purged", content="")
    alignment = transcript_align(
        thread=thread, earlier=said(*EXCHANGE, ("user", "Nice weather."), ("assistant", "Indeed."))
    )
    assert (alignment.matched, alignment.removed, alignment.differing, alignment.new) == (2, 2, 0, [])


def test_a_transcript_shorter_than_its_thread_reads_one_message_past_it(owner):
    thread = make_thread(owner)
    history(thread, *EXCHANGE * 20)
    with CaptureQueriesContext(connection) as captured:
        alignment = transcript_align(thread=thread, earlier=said(*EXCHANGE))
    # Not continued (the thread is longer), and only the transcript's two positions and one more were read.
    assert (alignment.matched, alignment.new, alignment.dropped_new) == (2, [], 0)
    (query,) = captured.captured_queries
    assert query["sql"].endswith("LIMIT 3")


def test_new_messages_past_the_end_are_kept_only_after_a_verified_live_tail(owner):
    thread = make_thread(owner)
    stored = history(thread, *EXCHANGE)
    more = said(*EXCHANGE, ("user", "Also a blue car."), ("assistant", "Noted."))
    assert transcript_align(thread=thread, earlier=more).new == more[2:]

    # The tail was forgotten: what follows it could be a shifted copy of it, so nothing is kept.
    Message.objects.filter(pk=stored[1].pk).update(status="deleted")
    alignment = transcript_align(thread=thread, earlier=more)
    assert (alignment.new, alignment.dropped_new, alignment.removed) == ([], 2, 1)


def test_an_edited_copy_is_dropped_and_stops_any_extension(owner):
    thread = make_thread(owner)
    history(thread, *EXCHANGE)
    alignment = transcript_align(
        thread=thread, earlier=said(("user", "I have a green bike."), EXCHANGE[1], ("user", "And a car."))
    )
    assert (alignment.matched, alignment.differing, alignment.new, alignment.dropped_new) == (1, 1, [], 1)


def test_the_thread_is_found_by_its_live_messages_at_their_positions(owner, other_owner):
    mine = make_thread(owner)
    history(mine, *EXCHANGE, ("user", "Where is my bike?"), ("assistant", "In the shed."))
    # Same first exchange elsewhere, but it goes on differently: not this conversation.
    elsewhere = make_thread(owner)
    history(elsewhere, *EXCHANGE, ("user", "Something else."), ("assistant", "Sure."))
    # Another owner's identical thread is never a candidate.
    history(make_thread(other_owner), *EXCHANGE, ("user", "Where is my bike?"), ("assistant", "In the shed."))

    transcript = said(*EXCHANGE, ("user", "Where is my bike?"), ("assistant", "In the shed."))
    assert thread_match(owner=owner, earlier=transcript) == mine
    assert thread_match(owner=owner, earlier=transcript[:2]) in (mine, elsewhere)
    # At the wrong position the same text anchors nothing.
    assert thread_match(owner=owner, earlier=[Said(role="user", text="x"), *transcript]) is None


def test_a_thread_whose_first_messages_were_purged_is_still_found_by_a_later_live_one(owner):
    thread = make_thread(owner)
    stored = history(thread, *EXCHANGE, ("user", "Where is my bike?"), ("assistant", "Your red bike."))
    Message.objects.filter(pk__in=[stored[0].pk, stored[1].pk, stored[3].pk]).update(status="purged", content="")
    transcript = said(*EXCHANGE, ("user", "Where is my bike?"), ("assistant", "Your red bike."))
    assert thread_match(owner=owner, earlier=transcript) == thread


def test_a_transcript_that_matches_nothing_keeps_only_its_last_message(owner):
    started = completion_turn_start(
        owner=owner, thread_id=None, conversation=said(*EXCHANGE, ("user", "What do I ride?"))
    )
    assert list(Message.objects.values_list("thread_id", "role", "content")) == [
        (started.thread.pk, "user", "What do I ride?")
    ]
    assert started.created_thread
    assert (started.alignment.dropped, started.alignment.new) == (2, [])
    # Untitled until its first reply is stored; then titled from the user's words (tests/chat/test_titles.py).
    assert (started.thread.title, started.thread.title_sources) == ("", [])


def test_stored_assistant_text_gets_every_earlier_live_message_of_the_thread_as_its_source(owner):
    thread = make_thread(owner)
    first, reply = history(thread, *EXCHANGE)
    started = completion_turn_start(
        owner=owner,
        thread_id=thread.pk,
        conversation=said(*EXCHANGE, ("user", "I sold it."), ("assistant", "Sorry to hear."), ("user", "Now what?")),
    )
    sold, sorry, now = Message.objects.filter(thread=thread).order_by("seq")[2:]
    assert [(m.role, m.content) for m in (sold, sorry, now)] == [
        ("user", "I sold it."),
        ("assistant", "Sorry to hear."),
        ("user", "Now what?"),
    ]
    assert sold.embedding is not None and sorry.embedding is not None
    assert set(ContextEdge.objects.filter(target=sorry).values_list("source_id", flat=True)) == {
        first.pk,
        reply.pk,
        sold.pk,
    }
    assert not ContextEdge.objects.filter(target=sold).exists()
    assert started.turn.user_message == now


def test_an_unknown_explicit_thread_is_not_found(owner, other_owner):
    from core.errors import NotFound

    with pytest.raises(NotFound):
        completion_turn_start(owner=owner, thread_id=make_thread(other_owner).pk, conversation=said(("user", "hi")))
    assert not Message.objects.exists()


def test_a_transcript_sent_into_an_empty_thread_keeps_only_its_last_message(owner, thread):
    started = completion_turn_start(
        owner=owner, thread_id=thread.pk, conversation=said(*EXCHANGE, ("user", "What do I ride?"))
    )
    assert list(Message.objects.values_list("thread_id", "content")) == [(thread.pk, "What do I ride?")]
    assert (started.created_thread, started.alignment.dropped) == (False, 2)


class _Meanwhile:
    """The first alignment (before the owner's lock) lets something happen to the thread right after it."""

    def __init__(self, align, meanwhile) -> None:
        self.align, self.meanwhile = align, meanwhile

    def __call__(self, **kwargs):
        aligned = self.align(**kwargs)
        meanwhile, self.meanwhile = self.meanwhile, lambda: None
        meanwhile()
        return aligned


def test_two_requests_extending_the_thread_at_once_store_the_extension_once(owner, monkeypatch):
    from assistant.openai import transcript

    thread = make_thread(owner)
    history(thread, *EXCHANGE)
    conversation = said(*EXCHANGE, ("user", "I sold it."), ("assistant", "Sorry to hear."), ("user", "Now what?"))
    twin = _Meanwhile(
        transcript.transcript_align,
        lambda: completion_turn_start(owner=owner, thread_id=thread.pk, conversation=conversation),
    )
    monkeypatch.setattr(transcript, "transcript_align", twin)
    started = completion_turn_start(owner=owner, thread_id=thread.pk, conversation=conversation)
    assert list(Message.objects.filter(thread=thread).order_by("seq").values_list("content", flat=True)) == [
        "I have a red bike.",
        "Noted: I have a red bike.",
        "I sold it.",
        "Sorry to hear.",
        "Now what?",
        "Now what?",
    ]
    assert (started.alignment.matched, started.alignment.new) == (4, [])


def test_a_tail_forgotten_before_the_lock_stops_the_extension(owner, monkeypatch):
    from assistant.openai import transcript

    thread = make_thread(owner)
    _, reply = history(thread, *EXCHANGE)
    conversation = said(*EXCHANGE, ("user", "Also a blue car."), ("assistant", "Noted."), ("user", "What do I ride?"))
    forget = _Meanwhile(
        transcript.transcript_align,
        lambda: Message.objects.filter(pk=reply.pk).update(status="purged", content=""),
    )
    monkeypatch.setattr(transcript, "transcript_align", forget)
    started = completion_turn_start(owner=owner, thread_id=thread.pk, conversation=conversation)
    assert list(Message.objects.filter(thread=thread).order_by("seq").values_list("content", flat=True)) == [
        "I have a red bike.",
        "",
        "What do I ride?",
    ]
    assert (started.alignment.new, started.alignment.dropped_new, started.alignment.removed) == ([], 2, 1)


def test_a_new_system_prompt_is_an_ancestor_of_the_client_replies_stored_with_it(owner):
    """The prompt node is stored before the transcript's new messages: a reply the client's model wrote under it
    derives from it, so purging the prompt removes that reply too."""
    from provenance.dependents import dep_ids

    thread = make_thread(owner)
    history(thread, *EXCHANGE)
    started = completion_turn_start(
        owner=owner,
        thread_id=thread.pk,
        conversation=said(*EXCHANGE, ("user", "My PIN?"), ("assistant", "Your PIN is ORCHID-5150."), ("user", "Ok.")),
        system="The PIN is ORCHID-5150.",
    )
    prompt = started.turn.system_message
    quoting = Message.objects.get(thread=thread, content="Your PIN is ORCHID-5150.")
    assert prompt.seq < quoting.seq
    assert quoting.pk in dep_ids(owner_id=owner.pk, roots=[prompt.pk])
    assert started.turn.user_message.pk not in dep_ids(owner_id=owner.pk, roots=[prompt.pk])


def test_a_rewritten_reply_holds_no_position_its_removed_original_does(owner):
    """After a regeneration the client still holds the original reply: that position is removed, and the
    transcript goes on lining up (the rewrite, which the client never saw, sits at the thread's end by seq)."""
    thread = make_thread(owner)
    _, reply, _, _ = history(thread, *EXCHANGE, ("user", "Also a car."), ("assistant", "Noted: a car."))
    Message.objects.filter(pk=reply.pk).update(status="deleted")
    rewrite = make_message(thread, "Noted: a bike.", role="assistant", replaces=reply.pk, place=reply.seq)
    transcript = said(*EXCHANGE, ("user", "Also a car."), ("assistant", "Noted: a car."))

    assert thread_match(owner=owner, earlier=transcript) == thread
    alignment = transcript_align(thread=thread, earlier=[*transcript, *said(("user", "And a boat."))])
    assert (alignment.matched, alignment.removed, alignment.differing) == (3, 1, 0)
    assert alignment.new == said(("user", "And a boat."))
    assert rewrite.pk not in [m.pk for m in Message.objects.filter(content=transcript[1].text)]


CALL = ToolCall(id="c1", name="get_weather", arguments='{"city": "Lyon"}')


def test_a_tool_call_and_its_result_hold_positions_compared_call_by_call(owner):
    thread = make_thread(owner)
    question = make_message(thread, "Weather?")
    make_message(
        thread,
        "Let me check.",
        role="assistant",
        tool_calls=[{"id": "c1", "name": "get_weather", "arguments": '{"city": "Lyon"}'}],
    )
    make_message(thread, "Sunny", role="tool", tool_call_id="c1")
    result = Said(role="tool", text="Sunny", tool_call_id="c1")
    same = [
        Said(role="user", text=question.content),
        Said(role="assistant", text="Let me check.", tool_calls=(CALL,)),
        result,
    ]
    assert transcript_align(thread=thread, earlier=same).matched == 3
    # Other arguments (or another call id) in the client's copy: not the stored call.
    edited = Said(
        role="assistant", text="Let me check.", tool_calls=(ToolCall(id="c1", name="get_weather", arguments="{}"),)
    )
    alignment = transcript_align(thread=thread, earlier=[same[0], edited, result])
    assert (alignment.matched, alignment.differing) == (2, 1)
    other = Said(role="tool", text="Sunny", tool_call_id="c2")
    assert transcript_align(thread=thread, earlier=[*same[:2], other]).differing == 1
