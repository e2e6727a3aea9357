import json

import pytest
from django.test import override_settings
from rest_framework.test import APIClient
from rest_framework.throttling import ScopedRateThrottle

from chat.models import Message, Thread
from provenance.models import DeletionRequest
from tests.factories import make_message


def error_of(response, status: int) -> dict:
    assert response.status_code == status, response.content
    assert "json" in response["Content-Type"]
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "fields"}
    assert body["error"]["message"].endswith((".", "?", "!"))
    return body["error"]


def test_anonymous_requests_answer_401_json(db):
    client = APIClient()
    for path in ["/api/threads/", "/api/messages/", "/api/graph/", "/api/deletions/", "/api/export/", "/api/schema/"]:
        error = error_of(client.get(path), 401)
        assert error["code"] == "not_authenticated"


def test_bad_token_answers_401(db):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token nope")
    assert error_of(client.get("/api/threads/"), 401)["code"] == "authentication_failed"


def test_token_endpoint_trades_credentials_for_a_token(owner):
    client = APIClient()
    response = client.post("/api/auth/token/", {"username": "alice", "password": "pw-for-tests"}, format="json")
    assert response.status_code == 200
    client.credentials(HTTP_AUTHORIZATION=f"Token {response.json()['token']}")
    assert client.get("/api/threads/").status_code == 200
    wrong = client.post("/api/auth/token/", {"username": "alice", "password": "wrong"}, format="json")
    assert error_of(wrong, 400)["code"] == "validation_error"


def test_session_auth_needs_csrf_for_writes(owner):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(owner)
    assert client.get("/api/threads/").status_code == 200
    assert error_of(client.post("/api/threads/", {}, format="json"), 403)["code"] == "permission_denied"
    token = client.get("/admin/login/").cookies["csrftoken"].value
    assert client.post("/api/threads/", {}, format="json", HTTP_X_CSRFTOKEN=token).status_code == 201


def test_malformed_json_and_wrong_content_type(api, thread):
    url = f"/api/threads/{thread.pk}/messages/"
    assert error_of(api.post(url, "{bad", content_type="application/json"), 400)["code"] == "malformed_request"
    assert error_of(api.post(url, "content=hi", content_type="text/plain"), 415)["code"] == "unsupported_media_type"
    assert not Message.objects.exists()


def test_unknown_path_and_method(api, thread):
    assert error_of(api.get("/api/nowhere/"), 404)["code"] == "not_found"
    assert error_of(api.get("/api/threads/abc/"), 404)["code"] == "not_found"
    assert error_of(api.delete(f"/api/threads/{thread.pk}/"), 405)["code"] == "method_not_allowed"
    assert (
        error_of(api.put(f"/api/threads/{thread.pk}/messages/", {}, format="json"), 405)["code"] == "method_not_allowed"
    )


@pytest.mark.parametrize("content", ["", "   \n\t", None, 12 and ["list"]])
def test_chat_refuses_empty_or_wrong_content(api, thread, content):
    error = error_of(api.post(f"/api/threads/{thread.pk}/messages/", {"content": content}, format="json"), 400)
    assert error["code"] == "validation_error"
    assert "content" in error["fields"]
    assert not Message.objects.exists()


@override_settings(DELLM_MAX_MESSAGE_CHARS=50)
def test_chat_refuses_a_message_over_the_limit(api, thread):
    url = f"/api/threads/{thread.pk}/messages/"
    error = error_of(api.post(url, {"content": "x" * 51}, format="json"), 400)
    assert error == {
        "code": "validation_error",
        "message": "A message has at most 50 characters.",
        "fields": {"content": "too long"},
    }
    assert not Message.objects.exists()


def test_chat_is_throttled(api, thread, monkeypatch):
    monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES", {"chat": "2/min"})
    url = f"/api/threads/{thread.pk}/messages/"
    codes = [api.post(url, {"content": "hello"}, format="json").status_code for _ in range(3)]
    assert codes == [202, 202, 429]
    assert api.get("/api/threads/").status_code == 200


def test_message_list_limits(api, owner):
    assert error_of(api.get("/api/messages/?page_size=201"), 400)["fields"] == {"page_size": "out of range"}
    assert error_of(api.get("/api/messages/?page_size=0"), 400)["code"] == "validation_error"
    assert error_of(api.get("/api/messages/?status=gone"), 400)["fields"].keys() == {"status"}
    assert error_of(api.get("/api/messages/?thread=x"), 400)["fields"].keys() == {"thread"}
    assert error_of(api.get("/api/messages/?page=9"), 404)["code"] == "not_found"
    assert api.get("/api/messages/?page_size=200").status_code == 200


def test_dependents_and_graph_limits(api, thread):
    message = make_message(thread)
    error = error_of(api.get(f"/api/messages/{message.pk}/dependents/?depth=-1"), 400)
    assert error["fields"].keys() == {"depth"}
    assert error_of(api.get("/api/graph/?include_deleted=maybe"), 400)["fields"].keys() == {"include_deleted"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"select": {"ids": [1]}, "mode": "shred"}, "mode"),
        ({"select": {"semantic": "Paris", "threshold": 1.5}, "mode": "soft"}, "threshold"),
        ({"select": {"semantic": "Paris", "threshold": -1.01}, "mode": "soft"}, "threshold"),
        ({"select": {"exact": "Paris"}, "mode": "soft", "depth": -1}, "depth"),
        ({"select": {"exact": "Paris"}, "mode": "expire", "expire_at": "2001-01-01T00:00:00Z"}, "expire_at"),
        ({"select": {"exact": "Paris"}, "mode": "expire", "expire_at": "next tuesday"}, "expire_at"),
        ({"select": {"exact": "Paris"}, "mode": "expire"}, "expire_at"),
        ({"select": {"exact": "Paris", "ids": [1]}, "mode": "soft"}, "select"),
        ({"select": {}, "mode": "soft"}, "select"),
        ({"select": {"request": "Forget it", "exact": "x"}, "mode": "soft"}, "select"),
        ({"select": {"request": "what is the weather?"}, "mode": "soft"}, "request"),
        ({"select": {"ids": "1"}, "mode": "soft"}, "select.ids"),
        ({"mode": "soft"}, "select"),
    ],
)
def test_deletion_preview_refuses_bad_input(api, thread, body, field):
    make_message(thread, "I live in Paris")
    error = error_of(api.post("/api/deletions/", body, format="json"), 400)
    assert error["code"] == "validation_error"
    assert field in error["fields"]
    assert not DeletionRequest.objects.exists()


def test_thread_title_limit(api, thread):
    error = error_of(api.patch(f"/api/threads/{thread.pk}/", {"title": "t" * 201}, format="json"), 400)
    assert error["fields"] == {"title": "too long"}
    assert Thread.objects.get(pk=thread.pk).title == "main"


def test_unexpected_errors_are_json_500(api, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("chat.views.thread_list", broken)
    error = error_of(api.get("/api/threads/"), 500)
    assert error["code"] == "server_error"


def test_handler500_answers_json_for_api_paths(rf):
    from core.api.handler import handler500

    response = handler500(rf.get("/api/threads/"))
    assert response.status_code == 500
    assert json.loads(response.content)["error"]["code"] == "server_error"
