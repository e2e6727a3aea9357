"""Forgetting part of a message from the graph's side panel, in Chromium."""

import pytest
from playwright.sync_api import expect

from chat.models import Message
from provenance.models import DeletionRequest
from tests.pages import click_node, explorer, screenshot, send, wait_graph_ready

pytestmark = [pytest.mark.browser, pytest.mark.worker]


def test_forget_only_part_of_a_message_from_the_graph(signed_in):
    page = signed_in("kira")
    send(page, "I live in Paris and work as a nurse.")
    send(page, "Where do I work and live?")
    original = Message.objects.get(owner__username="kira", seq=1)

    page.get_by_role("link", name="Memory graph").click()
    wait_graph_ready(page)
    click_node(page, original.pk)
    panel = page.locator(".explorer-panel")
    field = panel.get_by_role("textbox", name="Forget only part…")
    field.fill("I work in Lyon")
    panel.locator("[data-action=preview-redact]").click()
    expect(panel.locator(".part-form .error-text")).to_have_text("Type words that occur in #1.")
    # Also in the question, which is not built from #1: forgetting it there is not this panel's job.
    question = Message.objects.get(owner__username="kira", content="Where do I work and live?")
    field.fill("work")
    panel.locator("[data-action=preview-redact]").click()
    expect(panel.locator(".part-form .error-text")).to_have_text(
        f"“work” is also in #{question.seq}, not built from #1: choose words found only here."
    )
    assert DeletionRequest.objects.get(owner__username="kira").status == "cancelled"

    field.fill("I live in Paris")
    panel.locator("[data-action=preview-redact]").click()
    editor = panel.locator("textarea[data-redaction]")
    expect(editor).to_have_value("I work as a nurse.")
    expect(panel.locator(".redaction-form .rewrite-cost")).to_have_text(
        "2 replies will be rewritten without this memory: 2 model calls."
    )
    screenshot(page, "graph-redaction-offer")

    panel.get_by_role("button", name="Forget this part…").click()
    dialog = page.get_by_role("dialog", name="Forget part of #1?")
    expect(dialog).to_contain_text("#1 will be replaced by “I work as a nurse.”")
    dialog.get_by_role("button", name="Forget this part").click()
    expect(page.locator(".rewrite-progress")).to_have_text("2 of 2 replies rewritten.", timeout=30_000)

    assert DeletionRequest.objects.filter(owner__username="kira", status="executed").count() == 1
    original.refresh_from_db()
    assert original.status == "deleted"
    replacement = Message.objects.get(replaces=original.pk)
    assert (replacement.status, replacement.content) == ("active", "I work as a nurse.")
    page.wait_for_function(
        "() => { const x = document.querySelector('[data-graph-page]').explorer;"
        f" return x.node({replacement.pk}).length && !x.node({original.pk}).length; }}"
    )
    assert explorer(page, f"x.node({replacement.pk}).data('caption')") == f"#{replacement.seq} I work as a nurse."
    screenshot(page, "graph-redacted")

    gone = page.request.get(f"/api/messages/{original.pk}/").json()
    kept = page.request.get(f"/api/messages/{replacement.pk}/").json()
    assert gone["status"] == "deleted"
    assert (kept["status"], kept["content"], kept["replaces"]) == ("active", "I work as a nurse.", original.pk)
    assert not Message.objects.filter(owner__username="kira", status="active", content__contains="Paris").exists()
