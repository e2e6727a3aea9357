"""The link a `/v1` client gets for a typed deletion request opens its confirmation card in the web app."""

import httpx
import pytest
from playwright.sync_api import expect

from chat.index.embeddings import embed_one
from chat.models import Message
from core.auth.tokens import token_create
from provenance.models import DeletionRequest
from tests.factories import make_edge, make_message, make_thread, make_user
from tests.pages import screenshot, sign_in

pytestmark = pytest.mark.browser


def test_the_link_in_a_clients_deletion_answer_opens_the_card(open_page, live_server, transactional_db):
    user = make_user("erin")
    thread = make_thread(user, "Home")
    fact = make_message(
        thread, "I live in Paris near the canal.", embedding=embed_one("I live in Paris near the canal.")
    )
    reply = make_message(thread, "Noted: you live in Paris.", role="assistant")
    make_edge(fact, reply)
    kept = make_message(thread, "My favourite food is ramen.", embedding=embed_one("My favourite food is ramen."))

    token = token_create(user=user)[1]
    with httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {token}"}) as client:
        answer = client.post(
            "/v1/chat/completions",
            json={"model": "dellm", "messages": [{"role": "user", "content": "Forget that I live in Paris"}]},
        ).json()
    link = answer["dellm"]["deletion_url"]
    deletion = DeletionRequest.objects.get(owner=user)
    assert link == f"{live_server.url}/?deletion={deletion.pk}"
    assert link in answer["choices"][0]["message"]["content"]

    page = open_page()
    sign_in(page, "erin")
    page.goto(link)
    card = page.get_by_role("group", name="Forget request")
    expect(card.locator(".ditem")).to_have_count(2)
    expect(card.locator(".dcard-summary")).to_contain_text("2 messages will be deleted")
    assert "deletion=" not in page.url
    screenshot(page, "chat-deletion-from-link")

    card.get_by_role("button", name="Delete 2 messages").click()
    expect(card).to_contain_text("2 messages deleted")
    expect(page.locator(f"#m-{fact.pk}")).to_have_count(0)
    expect(page.locator(f"#m-{kept.pk}")).to_have_count(1)
    deletion.refresh_from_db()
    assert (deletion.status, sorted(deletion.deleted_ids)) == ("executed", [fact.pk, reply.pk])
    assert list(Message.objects.filter(owner=user, status="active").values_list("pk", flat=True)) == [kept.pk]

    # Opened again, the link says what became of it instead of offering it twice.
    page.goto(link)
    expect(page.locator(".toast")).to_contain_text("This deletion request is already executed.")
    expect(page.get_by_role("group", name="Forget request")).to_have_count(0)
