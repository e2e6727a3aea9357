"""Regeneration and redaction over HTTP: preview cost, redaction offer, confirm, progress, undo preview."""

import pytest

from chat.models import Message
from chat.turns.run import turn_run
from chat.turns.start import turn_create
from tests.helpers import wait_for


def _rewritten(deletion: dict) -> dict | None:
    """The deletion once its receipt has its regeneration check (every rewrite run), else None."""
    return deletion if "regeneration" in ((deletion["receipt"] or {}).get("checks") or {}) else None


def say(thread, text: str):
    turn = turn_create(thread=thread, content=text, enqueue=False)
    return turn_run(turn_id=turn.pk, owner_id=turn.owner_id)


@pytest.mark.django_db(transaction=True)
def test_forget_part_of_a_message_over_http(api, owner, thread):
    told = say(thread, "I live in Paris and work as a nurse.")
    asked = say(thread, "Where do I work and live?")

    preview = api.post(
        "/api/deletions/",
        {"select": {"request": "Forget that I live in Paris"}, "mode": "soft", "derived": "regenerate"},
        format="json",
    )
    assert preview.status_code == 201
    body = preview.json()
    assert body["derived"] == "regenerate"
    assert told.user_message_id in body["matched"]
    assert body["redactions"] == [
        {
            "message": told.user_message_id,
            "text": "I work as a nurse.",
            "regenerate": [told.reply_id, asked.reply_id],
        }
    ]
    assert body["model_calls"] == len(body["regenerate"])
    # The offer is not stored: reading the deletion again does not show the text.
    assert api.get(f"/api/deletions/{body['id']}/").json()["redactions"] == []

    done = api.post(
        f"/api/deletions/{body['id']}/confirm/",
        {"redactions": {str(told.user_message_id): "I work as a nurse and live in Lyon."}},
        format="json",
    )
    assert done.status_code == 200
    # Verified after the answer; the rewrites start after the receipt and add its regeneration check (docs/API.md).
    result = wait_for(lambda: _rewritten(api.get(f"/api/deletions/{body['id']}/").json()))
    replacement = result["redacted"][str(told.user_message_id)]
    assert result["regeneration"]["state"] == "done"
    assert result["regeneration"]["rewritten"] == result["regeneration"]["total"] == 2
    assert [t["replaces"] for t in result["regeneration"]["turns"]] == [told.reply_id, asked.reply_id]
    assert result["receipt"]["checks"]["regeneration"]["passed"] is True

    thread_body = api.get(f"/api/threads/{thread.pk}/").json()
    shown = [(m["id"] == replacement, m["content"], m["replaces"]) for m in thread_body["messages"]]
    assert shown == [
        (True, "I work as a nurse and live in Lyon.", told.user_message_id),
        (False, "Noted — work and job: you work as a nurse; home city: you live in Lyon.", told.reply_id),
        (False, "Where do I work and live?", None),
        (False, "From what you told me: “I work as a nurse and live in Lyon.”", asked.reply_id),
    ]

    undo = api.get(f"/api/deletions/{body['id']}/undo/").json()
    rewrites = {t["reply"] for t in result["regeneration"]["turns"]} | {replacement}
    assert (undo["restores"], set(undo["removes"])) == (result["deleted"], rewrites)
    undone = api.post(f"/api/deletions/{body['id']}/undo/").json()
    assert (undone["status"], set(undone["undo_removed"])) == ("undone", rewrites)
    contents = [m["content"] for m in api.get(f"/api/threads/{thread.pk}/").json()["messages"]]
    assert contents == [
        "I live in Paris and work as a nurse.",
        "Noted — home city: you live in Paris; work and job: you work as a nurse.",
        "Where do I work and live?",
        asked.reply.content,
    ]


@pytest.mark.django_db(transaction=True)
def test_bad_regeneration_input_is_a_clear_400_and_changes_nothing(api, owner, thread):
    told = say(thread, "I live in Paris and work as a nurse.")
    bad = api.post("/api/deletions/", {"select": {"exact": "Paris"}, "mode": "soft", "derived": "x"}, format="json")
    assert (bad.status_code, bad.json()["error"]["code"]) == (400, "validation_error")
    preview = api.post("/api/deletions/", {"select": {"exact": "Paris"}, "mode": "soft"}, format="json").json()
    for body in (
        {"redactions": {str(told.reply_id): "x"}},
        {"redactions": {"nope": "x"}},
        {"redactions": {str(told.user_message_id): ""}},
        {"redactions": ["x"]},
        {"derived": "sometimes"},
    ):
        response = api.post(f"/api/deletions/{preview['id']}/confirm/", body, format="json")
        assert (response.status_code, response.json()["error"]["code"]) == (400, "validation_error"), body
    assert Message.objects.filter(owner=owner, status="active").count() == 2
    assert api.post(f"/api/deletions/{preview['id']}/resume/").status_code == 409
