"""Forgetting precisely in Chromium: redact part of a message from the chat card, rewrite from the graph, undo."""

import re

import pytest
from playwright.sync_api import expect

from chat.models import Message, Turn
from provenance.models import DeletionRequest
from tests.pages import ask_to_forget, click_node, screenshot, send, wait_graph_ready

pytestmark = [pytest.mark.browser, pytest.mark.worker]


def shown(page) -> list[str]:
    return [text.strip() for text in page.locator("[data-messages] .msg:not(.msg-leaving) .msg-body").all_inner_texts()]


def test_forget_part_of_a_message_from_the_chat_card_and_undo(signed_in):
    page = signed_in("hana")
    send(page, "I live in Paris and work as a nurse.")
    send(page, "Where do I work and live?")

    card = ask_to_forget(page, "Forget that I live in Paris")
    text = card.locator("textarea[data-redaction]")
    expect(text).to_have_value("I work as a nurse.")
    expect(card.get_by_role("checkbox", name=re.compile("Rewrite the replies built from it"))).to_be_checked()
    expect(card).to_contain_text("2 replies will be rewritten without this memory: 2 model calls.")
    screenshot(page, "chat-redaction-offer")

    card.get_by_role("button", name=re.compile(r"^Delete \d+ messages$")).click()
    expect(card.locator(".rewrite-progress")).to_have_text("2 of 2 replies rewritten.", timeout=30_000)
    expected = [
        "I work as a nurse.",
        "Noted — work and job: you work as a nurse.",
        "Where do I work and live?",
        "From what you told me: “I work as a nurse.”",
    ]
    expect(page.locator("[data-messages] .msg-assistant .badge-rewritten")).to_have_count(2, timeout=30_000)
    assert shown(page) == expected
    screenshot(page, "chat-redacted-and-rewritten")
    deletion = DeletionRequest.objects.get(owner__username="hana", status="executed")
    assert not Message.objects.filter(owner__username="hana", status="active", content__contains="Paris").exists()
    assert deletion.receipt["passed"] is True

    card.get_by_role("button", name="Undo").click()
    dialog = page.get_by_role("dialog", name="Undo this deletion?")
    expect(dialog).to_contain_text(
        f"Undo restores {len(deletion.deleted_ids)} messages and removes 3 rewritten messages."
    )
    dialog.get_by_role("button", name="Undo").click()
    # The thread is reopened with the original back, which redraws the conversation;
    # the card saying "Restored" must outlive that (it once vanished with it, and the
    # test passed only if it looked during the thread's fetch).
    expect(page.locator("[data-messages] .msg-body").first).to_have_text("I live in Paris and work as a nurse.")
    expect(card).to_contain_text("Restored")
    expect(page.locator("[data-messages] > li").last).to_have_attribute("data-state", "undone")
    assert not Message.objects.filter(owner__username="hana", status="active", replaces__isnull=False).exists()


def test_rewrite_from_the_graph_and_undo(signed_in):
    page = signed_in("ivan")
    send(page, "My locker code at the pool is 4321.")
    answer = send(page, "What is my locker code at the pool?")
    expect(answer.locator(".msg-body")).to_contain_text("4321")
    code = Message.objects.get(owner__username="ivan", seq=1)

    page.get_by_role("link", name="Memory graph").click()
    wait_graph_ready(page)
    click_node(page, code.pk)
    panel = page.locator(".explorer-panel")
    panel.get_by_role("button", name="Preview delete").click()
    total = int(panel.locator(".preview-summary [data-count]").get_attribute("data-count"))
    panel.get_by_role("checkbox", name=re.compile("Rewrite the replies built from it")).check()
    panel.get_by_role("button", name=f"Delete {total} messages…").click()
    dialog = page.get_by_role("dialog", name=f"Delete {total} messages?")
    expect(dialog).to_contain_text("1 reply will be rewritten without this memory: 1 model call.")
    screenshot(page, "graph-rewrite-confirm")
    dialog.get_by_role("button", name=f"Delete {total} messages").click()

    expect(page.locator(".rewrite-progress")).to_have_text("1 of 1 reply rewritten.", timeout=30_000)
    turn = Turn.objects.get(owner__username="ivan", deletion_id__isnull=False)
    assert turn.reply.content == "I don't have anything in memory about that yet."
    page.wait_for_function(f"() => document.querySelector('[data-graph-page]').explorer.node({turn.reply_id}).length")
    screenshot(page, "graph-rewritten")

    page.locator(".toast-success").get_by_role("button", name="Undo").click()
    dialog = page.get_by_role("dialog", name="Undo this deletion?")
    expect(dialog).to_contain_text(f"Undo restores {total} messages and removes 1 rewritten message.")
    dialog.get_by_role("button", name="Undo").click()
    expect(page.locator(".toast-success").last).to_contain_text("Restored.")
    statuses = dict(Message.objects.filter(owner__username="ivan").values_list("pk", "status"))
    assert statuses[turn.reply_id] == "deleted"
    assert {statuses[pk] for pk in statuses if pk != turn.reply_id} == {"active"}


def test_forget_an_address_by_name_keeps_its_neighbour_until_ticked(signed_in):
    page = signed_in("ines")
    send(page, "Dana's address is dana@example.org.")
    send(page, "Dana Kim's address is dana.kim@example.org.")

    card = ask_to_forget(page, "Forget dana@example.org")
    expect(card.get_by_test_id("resolution")).to_have_text(
        "Matched as the e-mail address dana@example.org, however written; no other is taken."
    )
    expect(card.locator(".dcard-summary")).to_contain_text("1 message matching your request")
    neighbour = card.get_by_test_id("related").locator("li", has_text="dana.kim@example.org")
    expect(neighbour).to_contain_text("kept: it holds another e-mail address")
    expect(neighbour.get_by_role("checkbox")).not_to_be_checked()
    screenshot(page, "chat-forget-identifier")

    card.get_by_role("button", name=re.compile(r"^Delete \d+ messages?$")).click()
    expect(card).to_contain_text("3 messages deleted (soft delete): #1 #2 #4.")
    live = Message.objects.filter(owner__username="ines", role="user", status="active")
    assert list(live.values_list("content", flat=True)) == ["Dana Kim's address is dana.kim@example.org."]
