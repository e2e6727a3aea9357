"""Odd input at every door gets a clear error and changes nothing, never a 500 (a review's findings)."""

import io
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import OperationalError
from django.test import Client
from psycopg_pool import PoolTimeout
from rest_framework.test import APIClient

from assistant.mcp import tools
from assistant.mcp.server import token_user
from assistant.mcp.tokens import agent_token_create
from assistant.openai import views
from chat.models import ImportJob, Message, Thread
from core.auth.tokens import token_create
from provenance.models import DeletionRequest
from tests.core.api.test_errors import error_of
from tests.factories import make_message

SUPERSCRIPT_TWO = "\u00b2"  # str.isdigit() says yes, int() says no


@pytest.mark.parametrize("size", [SUPERSCRIPT_TWO, "1" * 5000, "-1", "0", " 5"])
def test_a_page_size_that_is_not_a_small_whole_number_is_a_400(api, size):
    for url in ("/api/messages/", "/api/deletions/", "/api/imports/"):
        assert error_of(api.get(url, {"page_size": size}), 400)["fields"] == {"page_size": "out of range"}


def test_a_cursor_whose_position_is_not_a_whole_number_is_a_400(api, thread):
    make_message(thread, "hello")
    # base64 of "p=%C2%B2": DRF decodes it to the position "²".
    response = api.get(f"/api/threads/{thread.pk}/messages/", {"cursor": "cD0lQzIlQjI="})
    assert error_of(response, 400)["fields"] == {"cursor": "invalid"}


def test_the_dependents_of_an_id_past_bigint_are_a_404(api):
    assert error_of(api.get(f"/api/messages/{10**20}/dependents/"), 404)["code"] == "not_found"
    assert error_of(api.get(f"/api/messages/{10**20}/dependents/?depth=1"), 404)["code"] == "not_found"


@pytest.mark.parametrize("charset", ["base64", "bz2_codec", "hex"])
def test_a_body_in_a_charset_that_is_not_text_is_a_400(api, charset):
    response = api.generic(
        "POST", "/api/threads/", b'{"title": "x"}', content_type=f"application/json; charset={charset}"
    )
    assert error_of(response, 400)["code"] == "malformed_request"
    assert not Thread.objects.exists()


def test_a_token_that_is_not_ascii_is_refused_at_every_door(owner):
    for door in ("/api/threads/", "/v1/models"):
        response = Client(HTTP_AUTHORIZATION="Token \xff").get(door)
        assert response.status_code == 401, (door, response.content)
        assert "json" in response["Content-Type"]
    assert token_user(b"Bearer \xff") is None
    assert token_user(f"Bearer {agent_token_create(owner=owner, name='agent')[1]}".encode()) == owner.pk


def test_too_many_query_parameters_are_a_400(api):
    query = "&".join(f"a{n}=1" for n in range(1001))
    assert error_of(api.get(f"/api/messages/?{query}"), 400)["code"] == "malformed_request"


def test_a_username_longer_than_any_user_has_is_a_400():
    response = APIClient().post("/api/auth/token/", {"username": "u" * 300, "password": "x"}, format="json")
    assert "username" in error_of(response, 400)["fields"]


def _encrypted_zip() -> bytes:
    """A zip whose member says it is encrypted (general-purpose flag bit 0), as `zip -e` writes it."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("conversations.json", b"[]")
    data = bytearray(buffer.getvalue())
    for signature, flags_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        data[data.index(signature) + flags_at] |= 0x1
    return bytes(data)


@pytest.mark.parametrize(
    ("name", "data"),
    [
        # Past Python's 4,300-digit limit on reading an integer.
        ("conversations.json", b'{"x": ' + b"1" * 5000 + b', "threads": []}'),
        ("export.zip", _encrypted_zip()),
    ],
)
def test_an_import_it_cannot_read_is_a_400_and_stores_nothing(api, name, data):
    response = api.post("/api/imports/", {"file": SimpleUploadedFile(name, data)}, format="multipart")
    assert error_of(response, 400)["code"] == "validation_error"
    assert (ImportJob.objects.count(), Message.objects.count()) == (0, 0)


@pytest.mark.parametrize(("field", "value"), [("value", SUPERSCRIPT_TWO), ("value", "1" * 5000), ("depth", str(2**31))])
def test_the_staff_request_form_refuses_odd_numbers(staff_client, owner, thread, field, value):
    message = make_message(thread, "hello")
    form = {"owner": owner.pk, "selector": "ids", "value": str(message.pk), "mode": "soft", field: value}
    response = staff_client.post("/admin/provenance/deletionrequest/subject-request/", form)
    assert response.status_code == 200
    assert field in response.context["form"].errors
    assert not DeletionRequest.objects.exists()


@pytest.mark.parametrize("text", ["a\x00b", "a\ud800b"])
def test_the_agent_tools_refuse_text_postgres_cannot_store(owner, text):
    with pytest.raises(tools.ValidationFailed):
        tools.remember(user=owner, client="test", text=text)
    with pytest.raises(tools.ValidationFailed):
        tools.search_memory(user=owner, client="test", query=text)
    assert not Thread.objects.exists()


def test_v1_with_the_database_busy_is_a_503_to_retry(owner, monkeypatch):
    def busy(request):
        raise OperationalError("couldn't get a connection") from PoolTimeout("pool timeout")

    monkeypatch.setattr(views, "_admit", busy)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token_create(user=owner)[1]}")
    body = {"model": "dellm", "messages": [{"role": "user", "content": "hi"}]}
    response = client.post("/v1/chat/completions", body, content_type="application/json")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response.json()["error"]["code"] == "service_unavailable"


def test_json_of_another_type_is_refused_not_converted(api, owner, thread):
    """DRF turns 12345 into "12345" and "yes" into true; these doors take JSON as sent (core/api/fields.py)."""
    fact = make_message(thread, "I drive a red Tesla")
    preview = api.post("/api/deletions/", {"select": {"exact": "red Tesla"}, "mode": "purge"}, format="json").json()
    refused = [
        api.post(f"/api/deletions/{preview['id']}/confirm/", {"redactions": {str(fact.pk): 12345}}, format="json"),
        api.post("/api/deletions/", {"select": {"exact": 123}, "mode": "soft"}, format="json"),
        api.post("/api/deletions/", {"select": {"semantic": 1.5}, "mode": "soft"}, format="json"),
        api.put("/api/agent-access/", {"may_confirm_deletions": "yes"}, format="json"),
        api.put("/api/agent-access/", {"may_confirm_deletions": 1}, format="json"),
        api.post("/api/threads/", {"title": 123}, format="json"),
        api.post(f"/api/threads/{thread.pk}/messages/", {"content": 12345}, format="json"),
        *(
            api.post(
                "/api/deletions/",
                {"select": {"ids": [fact.pk]}, "mode": "expire", "expire_at": when},
                format="json",
            )
            # No zone; then a well-formed date that does not exist.
            for when in ("2099-01-01T10:00:00", "2099-13-01T10:00")
        ),
    ]
    assert [(r.status_code, r.json()["error"]["code"]) for r in refused] == [(400, "validation_error")] * len(refused)
    fact.refresh_from_db()
    assert (fact.status, fact.content) == ("active", "I drive a red Tesla")
    assert api.get("/api/agent-access/").json()["may_confirm_deletions"] is False
    # As sent, they still work.
    assert api.put("/api/agent-access/", {"may_confirm_deletions": True}, format="json").status_code == 200
    aware = {"select": {"ids": [fact.pk]}, "mode": "expire", "expire_at": "2099-01-01T10:00:00Z"}
    assert api.post("/api/deletions/", aware, format="json").status_code == 201
