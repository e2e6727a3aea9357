"""Bounded everything: rate limits on costly endpoints, pages, windows, caps."""

import itertools
import json

import pytest
import redis
from django.conf import settings
from django.core.cache import cache
from django.test import override_settings

from core.api.throttles import CostThrottle
from provenance.deletions.preview import deletion_preview
from provenance.models import DeletionRequest
from tests.core.api.test_errors import error_of
from tests.factories import make_edge, make_message


def _history(thread, n: int = 6) -> list:
    """A chain #1 -> #2 -> ... -> #n."""
    messages = [make_message(thread, f"note {i}", role="user" if i == 0 else "assistant") for i in range(n)]
    for source, target in itertools.pairwise(messages):
        make_edge(source, target)
    return messages


def _costly_requests(api, first, thread) -> dict[str, callable]:
    preview = {"select": {"ids": [first.pk]}, "mode": "soft"}
    deletion = deletion_preview(owner=first.owner, actor=first.owner, mode="soft", ids=[first.pk])
    return {
        "deletion_preview": lambda: api.post("/api/deletions/", preview, format="json"),
        "deletion_action": lambda: api.post(f"/api/deletions/{deletion.pk}/cancel/"),
        "dependents": lambda: api.get(f"/api/messages/{first.pk}/dependents/"),
        "graph": lambda: api.get("/api/graph/"),
        "export": lambda: api.get("/api/export/"),
        "search": lambda: api.get("/api/messages/?q=note"),
        "thread": lambda: api.get(f"/api/threads/{thread.pk}/"),
    }


def test_every_costly_endpoint_is_rate_limited_in_the_shared_cache(api, owner, thread, monkeypatch):
    first = _history(thread)[0]
    requests = _costly_requests(api, first, thread)
    monkeypatch.setattr(CostThrottle, "THROTTLE_RATES", {scope: "2/min" for scope in requests} | {"chat": "9/min"})
    for scope, send in requests.items():
        assert send().status_code < 400, scope
        assert send().status_code < 410, scope  # a second cancel is a 409 conflict, still counted
        response = send()
        assert error_of(response, 429)["code"] == "throttled", scope
        assert 0 < int(response["Retry-After"]) <= 60
    # Counted in Redis, so every web process sees the same counts.
    client = redis.Redis.from_url(settings.REDIS_URL)
    keys = {key.decode() for key in client.scan_iter(match=f"{cache.key_prefix}:*throttle_*")}
    assert {f"{cache.key_prefix}:1:throttle_{scope}_{owner.pk}" for scope in requests} <= keys
    # A plain page of messages is no search and stays free.
    assert all(api.get("/api/messages/").status_code == 200 for _ in range(3))
    # A thread's pages share the thread detail's budget; sending in it is the chat's.
    assert error_of(api.get(f"/api/threads/{thread.pk}/messages/"), 429)["code"] == "throttled"
    assert api.post(f"/api/threads/{thread.pk}/messages/", {"content": "hello"}, format="json").status_code == 202


def test_deletion_history_is_paginated_and_keeps_its_list_shape(api, owner, thread):
    message = make_message(thread, "x")
    made = [deletion_preview(owner=owner, actor=owner, mode="soft", ids=[message.pk]).pk for _ in range(3)]
    first = api.get("/api/deletions/?page_size=2")
    assert [d["id"] for d in first.json()] == made[::-1][:2]
    assert first["X-Total-Count"] == "3"
    assert first["Link"] == '<http://testserver/api/deletions/?page=2&page_size=2>; rel="next"'
    second = api.get("/api/deletions/?page=2&page_size=2")
    assert [d["id"] for d in second.json()] == made[:1]
    assert "next" not in second.get("Link", "")
    with override_settings(DELLM_PAGE_SIZE=2):
        assert len(api.get("/api/deletions/").json()) == 2
    assert error_of(api.get(f"/api/deletions/?page_size={settings.DELLM_MAX_PAGE_SIZE + 1}"), 400)


def test_graph_opens_as_a_window_with_a_way_to_older_messages(api, thread):
    messages = _history(thread, 5)
    with override_settings(DELLM_GRAPH_WINDOW=2):
        body = api.get("/api/graph/").json()
    assert [n["data"]["id"] for n in body["nodes"]] == [m.pk for m in messages[3:]]
    assert [e["data"]["id"] for e in body["edges"]] == [f"e{messages[3].pk}-{messages[4].pk}"]
    assert (body["total"], body["truncated"]) == (5, True)
    assert body["next"] == "http://testserver/api/graph/?before=4"
    older = api.get("/api/graph/?before=4&limit=3").json()
    assert [n["data"]["id"] for n in older["nodes"]] == [m.pk for m in messages[:3]]
    assert (older["truncated"], older["next"]) == (False, None)
    too_many = api.get(f"/api/graph/?limit={settings.DELLM_GRAPH_MAX_NODES + 1}")
    assert error_of(too_many, 400)["fields"] == {
        "limit": f"Ensure this value is less than or equal to {settings.DELLM_GRAPH_MAX_NODES}."
    }
    with override_settings(DELLM_GRAPH_MAX_EDGES=1):
        capped = api.get("/api/graph/").json()
    assert (len(capped["edges"]), capped["truncated"], capped["next"]) == (1, True, None)


def test_export_is_streamed(api, thread):
    _history(thread, 3)
    response = api.get("/api/export/")
    assert response.streaming
    assert "no-store" in response["Cache-Control"]
    body = json.loads(b"".join(response.streaming_content))
    assert set(body) == {"exported_at", "username", "threads", "messages", "edges", "deletions"}
    assert len(body["messages"]) == 3 and len(body["edges"]) == 2


@pytest.mark.parametrize("cap", [2])
def test_explanation_paths_are_capped(api, owner, thread, settings, cap):
    settings.DELLM_MAX_EXPLANATION_PATHS = cap
    messages = _history(thread, 6)
    body = api.get(f"/api/messages/{messages[0].pk}/dependents/").json()
    assert [d["id"] for d in body["dependents"]] == [m.pk for m in messages[1:3]]
    assert (body["count"], body["truncated"]) == (5, True)
    preview = api.post("/api/deletions/", {"select": {"ids": [messages[0].pk]}, "mode": "soft"}, format="json").json()
    assert preview["total"] == 6
    assert len(preview["explanations"]) == cap
    assert DeletionRequest.objects.get(pk=preview["id"]).dependent_ids == [m.pk for m in messages[1:]]


def test_dependents_list_every_id_and_give_any_path_on_demand(api, other_api, thread, settings):
    settings.DELLM_MAX_EXPLANATION_PATHS = 2
    messages = _history(thread, 6)
    ids = [m.pk for m in messages]
    body = api.get(f"/api/messages/{ids[0]}/dependents/").json()
    assert (body["ids"], body["count"], body["truncated"]) == (ids[1:], 5, True)
    assert [d["path"] for d in body["dependents"]] == [ids[:2], ids[:3]]
    # Fewer paths on request (none: the ids and the count alone); never more than the bound.
    assert api.get(f"/api/messages/{ids[0]}/dependents/?paths=0").json() == {
        "root": ids[0],
        "dependents": [],
        "ids": ids[1:],
        "count": 5,
        "live": 5,
        "truncated": True,
    }
    assert len(api.get(f"/api/messages/{ids[0]}/dependents/?paths=1000").json()["dependents"]) == 2
    error_of(api.get(f"/api/messages/{ids[0]}/dependents/?paths=-1"), 400)
    # The farthest one's path, past the bound, on demand.
    far = api.get(f"/api/messages/{ids[0]}/dependents/{ids[5]}/").json()
    assert far == {"root": ids[0], "id": ids[5], "path": ids}
    assert api.get(f"/api/messages/{ids[1]}/dependents/{ids[3]}/?depth=2").json()["path"] == ids[1:4]
    error_of(api.get(f"/api/messages/{ids[1]}/dependents/{ids[4]}/?depth=2"), 404)
    error_of(api.get(f"/api/messages/{ids[3]}/dependents/{ids[1]}/"), 404)
    error_of(other_api.get(f"/api/messages/{ids[0]}/dependents/{ids[5]}/"), 404)
