"""Deletions, dependents, graph and export over HTTP."""

import json
from datetime import datetime, timedelta

from django.utils import timezone

from chat.models import Message
from provenance.api.serializers.graph import EdgeDataSerializer, GraphSerializer, NodeDataSerializer
from provenance.models import DeletionRequest
from tests.factories import make_edge, make_message, make_thread


def chain(thread):
    """#1 -> #2 -> #3, and #4 unrelated."""
    a = make_message(thread, "I live in Paris")
    b = make_message(thread, "Noted Paris", role="assistant")
    c = make_message(thread, "You live in Paris", role="assistant")
    make_edge(a, b, rank=0, score=1.0)
    make_edge(b, c, rank=1, score=0.7)
    d = make_message(thread, "I like tea")
    return a, b, c, d


def test_deletion_preview_confirm_and_undo(api, thread):
    a, b, c, d = chain(thread)
    preview = api.post("/api/deletions/", {"select": {"ids": [a.pk]}, "mode": "soft"}, format="json")
    assert preview.status_code == 201
    body = preview.json()
    assert (body["status"], body["matched"], body["dependents"], body["total"]) == (
        "previewed",
        [a.pk],
        [b.pk, c.pk],
        3,
    )
    assert body["explanations"] == {str(b.pk): [a.pk, b.pk], str(c.pk): [a.pk, b.pk, c.pk]}
    assert Message.objects.filter(status="active").count() == 4

    done = api.post(f"/api/deletions/{body['id']}/confirm/").json()
    assert (done["status"], done["deleted"]) == ("executed", [a.pk, b.pk, c.pk])
    assert [m["id"] for m in api.get("/api/messages/").json()["results"]] == [d.pk]
    assert [m["id"] for m in api.get("/api/messages/?status=deleted").json()["results"]] == [a.pk, b.pk, c.pk]

    assert api.get(f"/api/deletions/{body['id']}/undo/").json()["restores"] == [a.pk, b.pk, c.pk]
    undone = api.post(f"/api/deletions/{body['id']}/undo/").json()
    assert undone["status"] == "undone"
    # Undone: an undo now would do nothing.
    plan = api.get(f"/api/deletions/{body['id']}/undo/").json()
    assert (plan["restores"], plan["removes"]) == ([], [])
    assert [m["id"] for m in api.get("/api/messages/").json()["results"]] == [a.pk, b.pk, c.pk, d.pk]
    history = api.get("/api/deletions/").json()
    assert [h["id"] for h in history] == [body["id"]]
    assert "Paris" not in str(history)


def test_deletion_cancel_and_conflicts(api, thread):
    a, b, c, _ = chain(thread)
    preview = api.post("/api/deletions/", {"select": {"exact": "paris"}, "mode": "purge"}, format="json").json()
    assert preview["matched"] == [a.pk, b.pk, c.pk]
    assert api.post(f"/api/deletions/{preview['id']}/cancel/").json()["status"] == "cancelled"
    assert api.post(f"/api/deletions/{preview['id']}/confirm/").status_code == 409
    assert api.post(f"/api/deletions/{preview['id']}/undo/").status_code == 409
    # What an undo would do is refused alike.
    assert api.get(f"/api/deletions/{preview['id']}/undo/").json()["error"]["code"] == "conflict"
    assert Message.objects.filter(status="active").count() == 4


def test_purge_empties_content_and_is_shown_empty(api, thread):
    a, b, c, _d = chain(thread)
    preview = api.post("/api/deletions/", {"select": {"ids": [b.pk]}, "mode": "purge"}, format="json").json()
    api.post(f"/api/deletions/{preview['id']}/confirm/")
    purged = api.get(f"/api/messages/{b.pk}/").json()
    assert (purged["status"], purged["content"]) == ("purged", "")
    nodes = api.get("/api/graph/?include_deleted=true").json()["nodes"]
    assert {n["data"]["id"]: n["data"]["label"] for n in nodes}[b.pk] == "#2 assistant"
    assert api.get(f"/api/messages/{a.pk}/").json()["derived"] == []
    assert api.get(f"/api/messages/{c.pk}/").json()["context"] == [b.pk]


def test_expire_is_scheduled(api, thread):
    a, b, *_ = chain(thread)
    at = (timezone.now() + timedelta(days=1)).isoformat()
    preview = api.post("/api/deletions/", {"select": {"ids": [a.pk]}, "mode": "expire", "expire_at": at}, format="json")
    assert preview.status_code == 201
    done = api.post(f"/api/deletions/{preview.json()['id']}/confirm/").json()
    assert done["status"] == "scheduled"
    assert a.pk in [m["id"] for m in api.get("/api/messages/").json()["results"]]
    shown = api.get(f"/api/messages/{a.pk}/").json()
    assert shown["status"] == "expiring"
    # The expiry that will take it, and when: the chat page takes it off once that deletion has run.
    assert shown["expiry"]["deletion"] == done["id"]
    assert datetime.fromisoformat(shown["expiry"]["at"]) == datetime.fromisoformat(at)
    assert api.get(f"/api/messages/{b.pk}/").json()["expiry"] is None
    api.post(f"/api/deletions/{done['id']}/cancel/")
    assert api.get(f"/api/messages/{a.pk}/").json()["expiry"] is None


def test_selection_matching_nothing_previews_total_zero(api, thread):
    chain(thread)
    body = api.post("/api/deletions/", {"select": {"exact": "Berlin"}, "mode": "soft"}, format="json").json()
    assert (body["total"], body["matched"]) == (0, [])
    assert api.post(f"/api/deletions/{body['id']}/confirm/").json()["deleted"] == []


def test_request_selector_is_recorded(api, thread):
    a, *_ = chain(thread)
    body = api.post("/api/deletions/", {"select": {"request": "delete message 1"}, "mode": "purge"}, format="json")
    assert body.json()["matched"] == [a.pk]
    audit = DeletionRequest.objects.get(pk=body.json()["id"])
    assert (audit.selector, audit.resolved_selector, audit.mode) == ("request", "ids", "purge")


def test_dependents_with_paths_and_depth(api, thread):
    a, b, c, _ = chain(thread)
    body = api.get(f"/api/messages/{a.pk}/dependents/").json()
    assert body == {
        "root": a.pk,
        "dependents": [
            {"id": b.pk, "seq": 2, "role": "assistant", "status": "active", "path": [a.pk, b.pk]},
            {"id": c.pk, "seq": 3, "role": "assistant", "status": "active", "path": [a.pk, b.pk, c.pk]},
        ],
        "ids": [b.pk, c.pk],
        "count": 2,
        "live": 2,
        "truncated": False,
    }
    assert api.get(f"/api/messages/{a.pk}/dependents/?depth=1").json()["count"] == 1
    assert api.get(f"/api/messages/{a.pk}/dependents/?depth=0").json()["count"] == 0


def test_a_preview_counts_what_it_would_change_when_part_of_dep_is_removed_already(api, thread):
    a, _, c, _ = chain(thread)

    def preview(mode):
        return api.post("/api/deletions/", {"select": {"ids": [a.pk]}, "mode": mode}, format="json").json()

    soft = api.post("/api/deletions/", {"select": {"ids": [c.pk]}, "mode": "soft"}, format="json").json()
    api.post(f"/api/deletions/{soft['id']}/confirm/")
    dependents = api.get(f"/api/messages/{a.pk}/dependents/").json()
    assert (dependents["count"], dependents["live"]) == (2, 1)
    # Soft leaves the deleted one as it is; a purge destroys its text too.
    assert [(p["total"], p["removes"]) for p in (preview("soft"), preview("purge"))] == [(3, 2), (3, 3)]
    purge = preview("purge")
    confirmed = api.post(f"/api/deletions/{purge['id']}/confirm/").json()
    assert (len(confirmed["deleted"]), confirmed["removes"]) == (3, None)
    assert preview("purge")["removes"] == 0


def test_graph_is_cytoscape_elements(api, thread):
    a, b, c, _d = chain(thread)
    make_message(thread, "x" * 60)
    graph = api.get(f"/api/graph/?thread={thread.pk}").json()
    assert graph["nodes"][0] == {
        "data": {
            "id": a.pk,
            "seq": 1,
            "role": "user",
            "status": "active",
            "label": "#1 user: I live in Paris",
            "thread": thread.pk,
            "imported_from": None,
            "tool_step": None,
            "subject": None,
        }
    }
    assert graph["nodes"][-1]["data"]["label"] == "#5 user: " + "x" * 40 + "…"
    assert graph["edges"] == [
        {"data": {"id": f"e{a.pk}-{b.pk}", "source": a.pk, "target": b.pk, "score": 1.0, "rank": 0, "signal": ""}},
        {"data": {"id": f"e{b.pk}-{c.pk}", "source": b.pk, "target": c.pk, "score": 0.7, "rank": 1, "signal": ""}},
    ]


def test_graph_answer_has_exactly_the_fields_its_schema_declares(api, thread):
    """The answer is written as plain dicts (graph_body), the schema by GraphSerializer: they must not drift."""
    chain(thread)
    graph = api.get("/api/graph/").json()
    assert set(graph) == set(GraphSerializer().fields)
    assert {key for node in graph["nodes"] for key in node["data"]} == set(NodeDataSerializer().fields)
    assert {key for edge in graph["edges"] for key in edge["data"]} == set(EdgeDataSerializer().fields)


def test_export_has_live_messages_edges_and_history_without_deleted_text(api, owner, thread):
    a, b, c, d = chain(thread)
    preview = api.post("/api/deletions/", {"select": {"ids": [c.pk]}, "mode": "soft"}, format="json").json()
    api.post(f"/api/deletions/{preview['id']}/confirm/")
    export = json.loads(b"".join(api.get("/api/export/").streaming_content))
    assert export["username"] == owner.username
    assert [m["id"] for m in export["messages"]] == [a.pk, b.pk, d.pk]
    assert export["edges"] == [{"source": a.pk, "target": b.pk, "score": 1.0, "rank": 0, "signal": ""}]
    assert [h["deleted"] for h in export["deletions"]] == [[c.pk]]
    assert "You live in Paris" not in str(export)


def test_graph_find_matches_what_the_window_s_messages_say(api, thread):
    fact = make_message(thread, "I live in Paris")
    # Its index holds the question's words too (its context, weight B): Find does not count those.
    reply = make_message(thread, "Noted.", role="assistant")
    make_edge(fact, reply, rank=0, score=1.0)
    later = make_message(thread, "Tea with milk, two sugars, every morning, and on Sundays at Zanzibar")
    assert reply.pk in [m["id"] for m in api.get("/api/messages/?q=paris").json()["results"]]

    def find(query: str) -> list[int]:
        answer = api.get(f"/api/graph/find/?{query}")
        assert answer.status_code == 200, answer.json()
        return answer.json()["ids"]

    assert find("q=paris") == [fact.pk]
    # Past the label's first 40 characters.
    assert find("q=zanzibar") == [later.pk]
    assert find("q=paris OR zanzibar") == [fact.pk, later.pk]
    # The window of the graph's same parameters: the newest message only.
    assert find("q=paris&limit=1") == [] and find("q=zanzibar&limit=1") == [later.pk]
    other = make_thread(thread.owner, "Travel")
    elsewhere = make_message(other, "Paris again")
    assert find("q=paris") == [fact.pk, elsewhere.pk]
    assert find(f"q=paris&thread={thread.pk}") == [fact.pk]
    # Deleted messages only with include_deleted, as the graph shows them; purged ones have no words.
    preview = api.post("/api/deletions/", {"select": {"ids": [elsewhere.pk]}, "mode": "soft"}, format="json")
    api.post(f"/api/deletions/{preview.json()['id']}/confirm/")
    assert find("q=paris") == [fact.pk]
    assert find("q=paris&include_deleted=true") == [fact.pk, elsewhere.pk]
    # No words, too many, or another user's thread: a clear error.
    for query, status in [("", 400), ("q=" + "a" * 201, 400), ("q=paris&thread=999999", 404)]:
        answer = api.get(f"/api/graph/find/?{query}")
        assert answer.status_code == status and "error" in answer.json()
