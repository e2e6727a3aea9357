"""Facts as a new user meets them, over HTTP with the offline model: the issue's two cases, and a turn's context."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from chat.models import ContextEdge, Message


@pytest.fixture
def say(tell):
    return lambda text: tell(text)["turn"]


def context_of(turn: dict) -> list[Message]:
    """The messages in a turn's context (its reply's sources, the question left out), in rank order."""
    edges = ContextEdge.objects.filter(target_id=turn["reply"]["id"], rank__gt=0).order_by("rank")
    return [edge.source for edge in edges if edge.signal != ContextEdge.Signal.SYSTEM]


def test_the_walk_near_home_is_suggested_with_the_home_city_in_its_context(api, thread, say):
    say("I live in Lisbon and work as a nurse at the children's hospital.")
    say("My dog is called Biscuit, a beagle.")
    turn = say("Suggest a weekend walk for me and my dog near home.")
    context = context_of(turn)
    assert any("Lisbon" in message.content for message in context), [m.content for m in context]
    fact = next(message for message in context if message.role == "fact" and "Lisbon" in message.content)
    assert fact.content == "Home city: I live in Lisbon."
    # The fact stands for the message it was drawn from, and the reply derives from both.
    source = Message.objects.get(content__startswith="I live in Lisbon")
    assert ContextEdge.objects.filter(source=source, target=fact, signal="fact").exists()


def test_the_latest_move_ranks_first_in_the_context(api, owner, thread, say, django_capture_on_commit_callbacks):
    lines = [
        {"conversation": "2021", "role": "user", "content": "I moved to Braga for a new job.",
         "created_at": "2021-03-01T10:00:00Z"},
        {"conversation": "2021", "role": "assistant", "content": "Braga is a lovely city.",
         "created_at": "2021-03-01T10:00:05Z"},
        {"conversation": "2024", "role": "user", "content": "I moved to Porto last week, the new flat is great.",
         "created_at": "2024-06-01T10:00:00Z"},
        {"conversation": "2024", "role": "assistant", "content": "Congratulations on the new flat!",
         "created_at": "2024-06-01T10:00:05Z"},
    ]  # fmt: skip
    upload = SimpleUploadedFile("history.jsonl", "\n".join(json.dumps(line) for line in lines).encode())
    with django_capture_on_commit_callbacks(execute=True):
        assert api.post("/api/imports/", {"file": upload}, format="multipart").status_code == 202
    turn = say("Which city did I move to most recently?")
    context = context_of(turn)
    assert context[0].role == "fact", [m.content for m in context]
    assert context[0].content == "Home city: I moved to Porto last week, the new flat is great."
    # The older statement is history: kept, superseded, never in the context in the newer one's place.
    assert not any(m.role == "fact" and "Braga" in m.content for m in context)
    assert Message.objects.filter(owner=owner, role="fact", content__contains="Braga", status="active").exists()
