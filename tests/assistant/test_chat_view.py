"""The chat flow over HTTP: post -> 202 -> turn done with its context; deletion requests typed in the chat."""

import re

import pytest
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from chat.models import Message, Thread, Turn
from provenance.dependents import taint_violations
from provenance.models import DeletionRequest
from tests.factories import make_thread


@pytest.fixture
def say(api, thread, django_capture_on_commit_callbacks):
    """Post a message, run the enqueued turn (Celery is eager in tests), return the finished turn."""

    def say(text: str) -> dict:
        with django_capture_on_commit_callbacks(execute=True):
            response = api.post(f"/api/threads/{thread.pk}/messages/", {"content": text}, format="json")
        assert response.status_code == 202, response.content
        body = response.json()
        assert body["turn"]["status"] == "pending"
        assert body["message"]["content"] == text
        turn = api.get(f"/api/turns/{body['turn']['id']}/")
        assert turn.status_code == 200
        return turn.json()

    return say


def visible_ids(api) -> list[int]:
    return [m["id"] for m in api.get("/api/messages/").json()["results"]]


def stood_for(api, ids: list[int]) -> dict[int, set[int]]:
    """{context item: the messages it stands for}: itself, and a fact the messages it was drawn from."""
    found = {}
    for pk in ids:
        item = api.get(f"/api/messages/{pk}/").json()
        found[pk] = {pk, *item["context"]} if item["role"] == "fact" else {pk}
    return found


def test_chat_turn_completes_with_reply_and_context(api, thread, say):
    first = say("I live in Paris.")
    assert first["status"] == "done" and first["error"] is None
    assert first["reply"]["content"] == "Noted — home city: you live in Paris."
    assert first["reply"]["context"] == [first["message"]]

    second = say("Where do I live?")
    assert second["reply"]["role"] == "assistant"
    # The fact drawn from the first message takes its place in the context (DELLM_FACTS_CONTEXT=replace).
    [fact] = Message.objects.filter(thread__owner=thread.owner, role="fact").values_list("pk", flat=True)
    context = set(second["reply"]["context"])
    assert {second["message"], fact} <= context and first["message"] not in context
    assert stood_for(api, [fact]) == {fact: {fact, first["message"]}}
    assert second["reply"]["content"] == "From what you told me: “I live in Paris.”"
    detail = api.get(f"/api/threads/{thread.pk}/").json()
    turns = [first["message"], first["reply"]["id"], second["message"], second["reply"]["id"]]
    assert [m["id"] for m in detail["messages"]] == turns
    assert detail["messages"][0]["derived"] == [first["reply"]["id"], fact]


def test_a_reply_says_why_each_memory_was_used(api, thread, say):
    # Two facts, each found by words it shares with the question (an OR
    # query: no message holds both facts' words). Two words for Paris: "work"
    # also sits in the next turn's index (its context, chat/index/context.py),
    # which lowers its IDF in this four-message history.
    paris = say("I live in Paris and work as a nurse.")
    dog = say("My dog is called Rex.")
    asked = say("Where do I work as a nurse, and how is my dog?")
    detail = asked["reply"]["context_detail"]
    assert [item["id"] for item in detail] == asked["reply"]["context"]
    assert (detail[0]["id"], detail[0]["rank"], detail[0]["score"], detail[0]["signal"]) == (
        asked["message"],
        0,
        1.0,
        "",
    )
    # Each statement is found, in its own words or as the fact drawn from it (which stands for it).
    signals = {said: item["signal"] for item in detail for said in stood_for(api, [item["id"]])[item["id"]]}
    assert signals[dog["message"]] in ("lexical", "both")
    assert signals[paris["message"]] in ("lexical", "both")
    assert [item["rank"] for item in detail] == list(range(len(detail)))


def test_natural_language_deletion_is_previewed_confirmed_and_gone_everywhere(api, owner, thread, say):
    paris = say("I live in Paris.")
    say("My favourite food is sushi.")
    where = say("Where do I live?")
    assert paris["message"] in set().union(*stood_for(api, where["reply"]["context"]).values())
    stored = Message.objects.count()

    response = api.post(
        f"/api/threads/{thread.pk}/messages/", {"content": "Forget that I live in Paris"}, format="json"
    )
    assert response.status_code == 200
    deletion = response.json()["deletion"]
    assert deletion["status"] == "previewed"
    assert deletion["mode"] == "soft"
    assert paris["message"] in deletion["matched"]
    assert where["reply"]["id"] in deletion["matched"] + deletion["dependents"]
    assert Message.objects.count() == stored  # the request itself is never stored
    assert not Turn.objects.filter(user_message__content__icontains="forget").exists()
    audit = DeletionRequest.objects.get(pk=deletion["id"])
    assert (audit.selector, audit.resolved_selector) == ("request", "semantic")
    assert paris["message"] in visible_ids(api)  # nothing changes before confirmation

    confirmed = api.post(f"/api/deletions/{deletion['id']}/confirm/")
    assert confirmed.status_code == 200
    gone = set(confirmed.json()["deleted"])
    assert confirmed.json()["status"] == "executed"
    assert {paris["message"], paris["reply"]["id"], where["reply"]["id"]} <= gone
    assert not gone & set(visible_ids(api))
    graph = api.get("/api/graph/").json()
    assert not gone & {n["data"]["id"] for n in graph["nodes"]}
    ends = {e["data"]["source"] for e in graph["edges"]} | {e["data"]["target"] for e in graph["edges"]}
    assert not gone & ends
    for message in api.get("/api/messages/").json()["results"]:
        assert not gone & set(message["context"] + message["derived"])
    assert taint_violations(owner_id=owner.pk) == []

    later = say("Where do I live?")
    assert not gone & set(later["reply"]["context"])
    assert "Paris" not in later["reply"]["content"]
    again = api.post(f"/api/deletions/{deletion['id']}/confirm/")
    assert again.json() == confirmed.json()


def test_deletion_request_by_number_and_exact_phrase(api, thread, say):
    first = say("my password is hunter2")
    by_number = api.post(f"/api/threads/{thread.pk}/messages/", {"content": "remove message 1"}, format="json")
    assert by_number.json()["deletion"]["matched"] == [first["message"]]
    exact = api.post(f"/api/threads/{thread.pk}/messages/", {"content": 'delete "password is hunter2"'}, format="json")
    # The reply acknowledged it without repeating it, so only the message holds the phrase; the reply is its dependent.
    assert exact.json()["deletion"]["matched"] == [first["message"]]
    assert exact.json()["deletion"]["dependents"] == [first["reply"]["id"]]
    assert DeletionRequest.objects.get(pk=exact.json()["deletion"]["id"]).resolved_selector == "exact"


def test_ordinary_message_with_deletion_words_is_chatted(api, thread, say):
    turn = say("how do I delete a file in git?")
    assert turn["status"] == "done"
    assert not DeletionRequest.objects.exists()


def test_failed_turn_can_be_retried(api, thread, say):
    turn = say("Hello there")
    Turn.objects.filter(pk=turn["id"]).update(status=Turn.Status.FAILED, error="The model timed out.")
    assert api.get(f"/api/turns/{turn['id']}/").json()["error"] == "The model timed out."
    retried = api.post(f"/api/turns/{turn['id']}/retry/")
    assert retried.status_code == 200
    assert retried.json()["status"] == "pending"
    assert retried.json()["error"] is None
    conflict = api.post(f"/api/turns/{turn['id']}/retry/")
    assert conflict.status_code == 409
    assert conflict.json()["error"]["code"] == "conflict"


def test_threads_create_rename_and_list_newest_first(api):
    first = api.post("/api/threads/", {}, format="json")
    second = api.post("/api/threads/", {"title": "  Travel  "}, format="json")
    assert first.status_code == second.status_code == 201
    assert second.json()["title"] == "Travel"
    renamed = api.patch(f"/api/threads/{first.json()['id']}/", {"title": "Work"}, format="json")
    assert renamed.json()["title"] == "Work"
    assert [t["title"] for t in api.get("/api/threads/").json()] == ["Work", "Travel"]


def test_the_thread_list_comes_a_page_at_a_time_and_new_threads_are_rate_limited(api, owner, monkeypatch):
    for n in range(5):
        make_thread(owner, title=f"T{n}")
    first = api.get("/api/threads/", {"page_size": 2})
    assert [t["title"] for t in first.json()] == ["T4", "T3"]
    assert first["X-Total-Count"] == "5"
    following = re.search(r'<([^>]+)>; rel="next"', first["Link"]).group(1)
    assert [t["title"] for t in api.get(following).json()] == ["T2", "T1"]

    rates = dict(api_settings.DEFAULT_THROTTLE_RATES, thread_create="2/min")
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", rates)
    assert [api.post("/api/threads/", {}, format="json").status_code for _ in range(3)] == [201, 201, 429]
    assert Thread.objects.filter(owner=owner).count() == 7
