"""A redaction preview's work is bounded: caps per preview, model rewrites charged to the chat budget."""

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from chat.index.embeddings import embed_one
from core.auth.tokens import token_create
from provenance.models import DeletionRequest
from tests.factories import make_message
from tests.helpers import outside_the_browsers_loop

NURSE = "I live in Paris and work as a nurse."


def preview(api, phrase: str = "Paris"):
    return api.post("/api/deletions/", {"select": {"exact": phrase}, "mode": "soft"}, format="json")


@pytest.fixture
def chat_rate(monkeypatch):
    """Set the chat budget (turns, /v1 and, now, redaction rewrites share it); other scopes as configured."""

    def set_rate(rate: str) -> None:
        rates = dict(api_settings.DEFAULT_THROTTLE_RATES, chat=rate)
        monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", rates)

    return set_rate


def test_preview_scans_within_its_caps_and_lists_the_rest(api, thread, settings):
    told = [make_message(thread, content=f"I live in Paris and work as nurse number {n}.") for n in range(4)]
    settings.DELLM_REDACTION_MAX_MESSAGES = 3
    settings.DELLM_REDACTION_MAX_CHARS = len(told[0].content) + len(told[1].content)
    body = preview(api).json()
    assert [p["message"] for p in body["redactions"]] == [told[0].pk, told[1].pk]
    assert body["redactions"][0]["text"] == "I work as nurse number 0."
    assert (body["redactions_truncated"], body["redactions_unscanned"]) == (True, [told[2].pk, told[3].pk])

    settings.DELLM_REDACTION_MAX_CHARS = 1_000_000
    body = preview(api).json()
    assert [p["message"] for p in body["redactions"]] == [told[0].pk, told[1].pk, told[2].pk]
    assert (body["redactions_truncated"], body["redactions_unscanned"]) == (True, [told[3].pk])

    # The user may still write the text of an unscanned message themselves.
    done = api.post(
        f"/api/deletions/{body['id']}/confirm/", {"redactions": {str(told[3].pk): "I am a nurse."}}, format="json"
    )
    assert done.status_code == 200
    assert list(done.json()["redacted"]) == [str(told[3].pk)]

    settings.DELLM_REDACTION_MAX_MESSAGES = 50
    body = preview(api, "nurse number 1").json()
    assert (body["redactions_truncated"], body["redactions_unscanned"]) == (False, [])


def test_model_rewrites_are_charged_to_the_chat_budget(api, thread, settings, openai_server, chat_rate):
    first, second = make_message(thread, content=NURSE), make_message(thread, content=f"Hi. {NURSE}")
    make_message(thread, content="Paris, as you said.", role="assistant")
    settings.DELLM_LLM = "openai"
    chat_rate("3/min")
    openai_server.script = [("ok", "I am a nurse."), ("ok", "Hi. I am a nurse."), ("ok", "I nurse.")]

    body = preview(api).json()
    assert [(p["message"], p["text"]) for p in body["redactions"]] == [
        (first.pk, "I am a nurse."),
        (second.pk, "Hi. I am a nurse."),
    ]
    assert len(openai_server.requests) == 2

    # One unit left for two rewrites: the model writes the first, the rules the second.
    body = preview(api).json()
    assert [(p["message"], p["text"]) for p in body["redactions"]] == [
        (first.pk, "I nurse."),
        (second.pk, "Hi. I work as a nurse."),
    ]
    assert len(openai_server.requests) == 3

    previews = DeletionRequest.objects.count()
    refused = preview(api)
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "throttled"
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert (DeletionRequest.objects.count(), len(openai_server.requests)) == (previews, 3)

    # The same budget as the chat's.
    assert api.post(f"/api/threads/{thread.pk}/messages/", {"content": "hello"}, format="json").status_code == 429


def test_rules_alone_spend_no_chat_budget(api, thread, chat_rate):
    make_message(thread, content=NURSE)
    chat_rate("1/min")
    assert [preview(api).status_code for _ in range(3)] == [201, 201, 201]
    assert api.post(f"/api/threads/{thread.pk}/messages/", {"content": "hello"}, format="json").status_code == 202


@pytest.mark.django_db(transaction=True)
def test_previews_that_show_no_redaction_ask_no_model(thread, owner, settings, openai_server, staff_client):
    fact = make_message(thread, content=NURSE, embedding=embed_one(NURSE))
    settings.DELLM_LLM = "openai"
    v1 = Client(HTTP_AUTHORIZATION=f"Bearer {token_create(user=owner)[1]}")
    body = {"model": "dellm", "messages": [{"role": "user", "content": "Forget that I live in Paris"}]}
    with outside_the_browsers_loop():
        assert v1.post("/v1/chat/completions", body, content_type="application/json").status_code == 200
    request = reverse("admin:provenance_deletionrequest_subject_request")
    staff = staff_client.post(request, {"owner": owner.pk, "selector": "exact", "value": "Paris", "mode": "purge"})
    assert staff.status_code == 302
    assert [d.matched_ids for d in DeletionRequest.objects.order_by("pk")] == [[fact.pk], [fact.pk]]
    # The /v1 answer is a sentence and a link; staff delete whole messages: no rewrite was asked for.
    assert [r["path"] for r in openai_server.requests if r["path"].endswith("/chat/completions")] == []
