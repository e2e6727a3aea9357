"""Two users: every endpoint and method with the other's ids answers 404, and nothing changes."""

import json

import pytest

from chat.models import Message, Thread, Turn
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview
from provenance.models import DeletionRequest
from tests.factories import make_edge, make_message, make_thread, make_user
from tests.helpers import client_for


@pytest.fixture
def bobs(other_owner):
    """Bob's objects: a thread, two linked messages, a turn, a soft deletion executed and a preview."""
    thread = make_thread(other_owner, "bob's")
    question = make_message(thread, "Bob's secret is 42")
    reply = make_message(thread, "Noted", role="assistant")
    make_edge(question, reply, rank=0, score=1.0)
    turn = Turn.objects.create(owner=other_owner, user_message=question, reply=reply, status=Turn.Status.FAILED)
    spare = make_message(thread, "Bob's other fact")
    executed = deletion_preview(owner=other_owner, actor=other_owner, mode="soft", ids=[spare.pk])
    deletion_confirm(deletion_id=executed.pk, owner_id=other_owner.pk, confirmed_by=other_owner)
    preview = deletion_preview(owner=other_owner, actor=other_owner, mode="soft", ids=[question.pk])
    return {"thread": thread, "message": question, "turn": turn, "executed": executed, "preview": preview}


def snapshot():
    return (
        sorted(Thread.objects.values_list("pk", "title")),
        sorted(Message.objects.values_list("pk", "status", "content")),
        sorted(Turn.objects.values_list("pk", "status")),
        sorted(DeletionRequest.objects.values_list("pk", "status")),
    )


def requests_for(b):
    thread, message, turn = b["thread"].pk, b["message"].pk, b["turn"].pk
    preview, executed = b["preview"].pk, b["executed"].pk
    return [
        ("get", f"/api/threads/{thread}/", None),
        ("patch", f"/api/threads/{thread}/", {"title": "mine now"}),
        ("post", f"/api/threads/{thread}/messages/", {"content": "hello"}),
        ("post", f"/api/threads/{thread}/messages/", {"content": "forget that Bob's secret is 42"}),
        ("get", f"/api/turns/{turn}/", None),
        ("post", f"/api/turns/{turn}/retry/", None),
        ("get", f"/api/messages/{message}/", None),
        ("get", f"/api/messages/{message}/dependents/", None),
        ("get", f"/api/messages/{message}/dependents/{message}/", None),
        ("get", f"/api/messages/?thread={thread}", None),
        ("get", f"/api/graph/?thread={thread}", None),
        ("get", f"/api/deletions/{preview}/", None),
        ("post", f"/api/deletions/{preview}/confirm/", None),
        ("post", f"/api/deletions/{preview}/cancel/", None),
        ("post", f"/api/deletions/{executed}/undo/", None),
        ("post", "/api/deletions/", {"select": {"ids": [message]}, "mode": "purge"}),
        ("post", "/api/deletions/", {"select": {"ids": [message]}, "mode": "soft"}),
    ]


def test_other_users_ids_answer_404_and_change_nothing(api, owner, bobs):
    make_message(make_thread(owner), "Alice's own")
    before = snapshot()
    for method, path, body in requests_for(bobs):
        response = getattr(api, method)(path, body, format="json")
        assert response.status_code == 404, (method, path, response.content)
        assert response.json()["error"]["code"] == "not_found"
        assert "Bob" not in response.content.decode()
    assert snapshot() == before


def test_owner_reaches_the_same_ids(other_api, bobs):
    assert other_api.get(f"/api/threads/{bobs['thread'].pk}/").status_code == 200
    assert other_api.get(f"/api/turns/{bobs['turn'].pk}/").status_code == 200
    assert other_api.get(f"/api/messages/{bobs['message'].pk}/").status_code == 200
    assert other_api.get(f"/api/deletions/{bobs['preview'].pk}/").status_code == 200


def test_lists_show_only_own_data(api, owner, bobs):
    mine = make_message(make_thread(owner, "alice's"), "Alice's own")
    assert [t["title"] for t in api.get("/api/threads/").json()] == ["alice's"]
    assert [m["id"] for m in api.get("/api/messages/?status=all").json()["results"]] == [mine.pk]
    assert [m["id"] for m in api.get("/api/messages/?q=secret").json()["results"]] == []
    assert [n["data"]["id"] for n in api.get("/api/graph/?include_deleted=true").json()["nodes"]] == [mine.pk]
    assert api.get("/api/deletions/").json() == []
    export = json.loads(b"".join(api.get("/api/export/").streaming_content))
    assert [m["id"] for m in export["messages"]] == [mine.pk]
    assert export["edges"] == [] and export["deletions"] == []
    assert "Bob" not in str(export)


def test_a_mixed_id_selection_is_404_as_a_whole(api, owner, bobs):
    mine = make_message(make_thread(owner), "Alice's own")
    response = api.post(
        "/api/deletions/", {"select": {"ids": [mine.pk, bobs["message"].pk]}, "mode": "soft"}, format="json"
    )
    assert response.status_code == 404
    assert not DeletionRequest.objects.filter(owner=owner).exists()


def test_nl_request_by_number_resolves_within_the_callers_history(api, owner, bobs):
    thread = make_thread(owner)
    mine = make_message(thread, "Alice's own")
    response = api.post(f"/api/threads/{thread.pk}/messages/", {"content": "delete message 1"}, format="json")
    assert response.status_code == 200
    assert response.json()["deletion"]["matched"] == [mine.pk]
    missing = api.post(f"/api/threads/{thread.pk}/messages/", {"content": "delete message 3"}, format="json")
    assert missing.status_code == 404


def test_staff_get_no_special_access_through_the_api(bobs):
    staff = make_user("carol", is_staff=True, is_superuser=True)
    assert client_for(staff).get(f"/api/messages/{bobs['message'].pk}/").status_code == 404
