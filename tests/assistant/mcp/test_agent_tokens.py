"""Agent tokens: an MCP client's token opens /mcp and nothing else, and only its user makes and revokes it."""

import httpx
import pytest
from django.contrib.auth import get_user_model
from knox.models import AuthToken

from assistant.mcp.server import token_user
from assistant.mcp.tokens import agent_token_create
from chat.agent_memory import agent_access_get
from chat.models import Turn
from chat.turns.start import turn_create
from core.auth.tokens import token_create
from provenance.deletions.preview import deletion_preview
from provenance.models import DeletionRequest
from tests.factories import make_message
from tests.helpers import client_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_agent_token_is_refused_at_every_door_but_mcp_over_real_http(live_server, owner, thread):
    fact = make_message(thread, "I live in Lyon")
    preview = deletion_preview(owner=owner, actor=owner, mode="soft", ids=[fact.pk])
    turn = turn_create(thread=thread, content="Where do I live?", enqueue=False)
    secret = agent_token_create(owner=owner, name="Claude Desktop")[1]
    agent = httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {secret}"}, timeout=30)
    with agent:
        answers = {
            "switch": agent.put("/api/agent-access/", json={"may_confirm_deletions": True}),
            "confirm": agent.post(f"/api/deletions/{preview.pk}/confirm/"),
            "messages": agent.get("/api/messages/"),
            "export": agent.get("/api/export/"),
            "tokens": agent.post("/api/agent-tokens/", json={"name": "another"}),
            "stream": agent.get(f"/api/turns/{turn.pk}/events/"),
        }
        completion = agent.post(
            "/v1/chat/completions", json={"model": "dellm", "messages": [{"role": "user", "content": "hi"}]}
        )
    assert {door: (r.status_code, r.json()["error"]["code"]) for door, r in answers.items()} == {
        door: (403, "agent_token") for door in answers
    }
    assert (completion.status_code, completion.json()["error"]["code"]) == (403, "agent_token")
    # Nothing changed: the switch is off, the deletion still a preview, the turn untouched, no token made.
    assert agent_access_get(owner_id=owner.pk).may_confirm_deletions is False
    assert DeletionRequest.objects.get(pk=preview.pk).status == DeletionRequest.Status.PREVIEWED
    assert Turn.objects.get(pk=turn.pk).status == Turn.Status.PENDING
    assert owner.agent_tokens.count() == 1
    # At /mcp the agent token is the one that works, and the person's own token is not.
    assert (token_user(f"Bearer {secret}".encode()), token_user(f"Bearer {token_create(user=owner)[1]}".encode())) == (
        owner.pk,
        None,
    )
    # The person's own token still opens the REST API.
    person = httpx.put(
        f"{live_server.url}/api/agent-access/",
        json={"may_confirm_deletions": False},
        headers={"Authorization": f"Token {token_create(user=owner)[1]}"},
    )
    assert person.status_code == 200


def test_the_user_makes_lists_and_revokes_agent_tokens(owner, other_owner, settings):
    settings.DELLM_AGENT_TOKEN_LIMIT = 2
    api = client_for(owner)
    made = api.post("/api/agent-tokens/", {"name": "  Claude Desktop "}, format="json")
    assert made.status_code == 201
    body = made.json()
    assert (sorted(body), body["name"]) == (["created_at", "id", "name", "token"], "Claude Desktop")
    assert token_user(f"Bearer {body['token']}".encode()) == owner.pk
    listed = api.get("/api/agent-tokens/").json()
    assert [(token["id"], token["name"], "token" in token) for token in listed] == [
        (body["id"], "Claude Desktop", False)
    ]
    # Bad input changes nothing; the limit is a 409.
    assert api.post("/api/agent-tokens/", {"name": ""}, format="json").status_code == 400
    assert api.post("/api/agent-tokens/", {"name": "x" * 101}, format="json").status_code == 400
    assert api.post("/api/agent-tokens/", {"name": 7}, format="json").status_code == 400
    assert api.post("/api/agent-tokens/", {"name": "IDE"}, format="json").status_code == 201
    assert api.post("/api/agent-tokens/", {"name": "third"}, format="json").json()["error"]["code"] == "conflict"
    # Another user sees none of them and cannot revoke them.
    assert client_for(other_owner).get("/api/agent-tokens/").json() == []
    assert client_for(other_owner).delete(f"/api/agent-tokens/{body['id']}/").status_code == 404
    # Revoked: refused at /mcp at once.
    assert api.delete(f"/api/agent-tokens/{body['id']}/").status_code == 204
    assert token_user(f"Bearer {body['token']}".encode()) is None
    assert api.delete(f"/api/agent-tokens/{body['id']}/").status_code == 404


def test_sign_ins_never_prune_an_agent_token_and_a_password_change_revokes_it(owner, settings):
    settings.DELLM_TOKEN_LIMIT_PER_USER = 3
    secret = agent_token_create(owner=owner, name="Claude Desktop")[1]
    for _ in range(5):
        token_create(user=owner)
    assert token_user(f"Bearer {secret}".encode()) == owner.pk
    assert AuthToken.objects.filter(user=owner, expiry__isnull=False).count() == 3
    user = get_user_model().objects.get(pk=owner.pk)
    user.set_password("a new password for this test")
    user.save()
    assert (token_user(f"Bearer {secret}".encode()), owner.agent_tokens.count()) == (None, 0)
