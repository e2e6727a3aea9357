"""The facts page in Chromium: facts a real worker drew from a chat, approved, declined, corrected and forgotten."""

import re
import time

import pytest
from playwright.sync_api import expect

from chat.models import Fact, Message
from provenance.models import DeletionRequest
from tests.pages import ask_to_forget, screenshot, send, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.worker]


def wait_for_facts(username: str, count: int) -> None:
    """The worker draws facts in a pass after each turn: wait until it has drawn `count` live ones."""
    deadline = time.monotonic() + 30
    while Message.objects.filter(owner__username=username, role="fact", status="active").count() < count:
        assert time.monotonic() < deadline, "the worker drew no facts"
        time.sleep(0.2)


def fact_item(page, text: str):
    return page.locator("li.fact", has=page.locator(":scope > .fact-main .fact-text", has_text=text))


def test_approve_decline_correct_and_forget_facts_on_their_page(signed_in, open_page):
    page = signed_in("kit")
    send(page, "I live in Lisbon and work as a nurse at the children's hospital.")
    send(page, "My dog is called Biscuit, a beagle.")
    send(page, "I love hiking in the mountains.")
    wait_for_facts("kit", 4)

    page.get_by_role("link", name="Facts").click()
    expect(page.get_by_role("heading", name="What DeLLM knows about you")).to_be_visible()
    groups = page.locator(".fact-group h2")
    expect(groups).to_have_text(["Home city", "Likes and hobbies", "Pets", "Work and job"])
    home = fact_item(page, "I live in Lisbon.")
    # Its source links into the chat, the fact itself into the graph.
    lisbon = Message.objects.get(owner__username="kit", role="user", content__startswith="I live in Lisbon")
    expect(home.locator(".fact-sources a")).to_have_attribute("href", f"/?thread={lisbon.thread_id}#m-{lisbon.pk}")
    fact = Message.objects.get(owner__username="kit", role="fact", content__contains="Lisbon")
    expect(home.locator(".fact-meta a.seq")).to_have_attribute("href", f"/graph/?focus={fact.pk}")
    screenshot(page, "facts-page-1280")

    dog = fact_item(page, "My dog is called Biscuit")
    dog.get_by_role("button", name="Approve").click()
    expect(dog.locator(".badge-approved")).to_have_text("approved")
    expect(dog.get_by_role("button", name="Approve")).to_have_count(0)
    assert Fact.objects.get(owner__username="kit", subject="pet").decision == "approved"

    fact_item(page, "I love hiking").get_by_role("button", name="Decline").click()
    expect(fact_item(page, "I love hiking")).to_have_count(0)
    expect(groups).to_have_text(["Home city", "Pets", "Work and job"])

    home.get_by_role("button", name="Correct").click()
    # Empty: the stored words are not handed to the user's new statement, which outlives their purge.
    expect(home.get_by_role("textbox", name="Corrected fact")).to_have_value("")
    expect(home.get_by_role("textbox", name="Corrected fact")).to_have_attribute("placeholder", "What is true now")
    home.get_by_role("textbox", name="Corrected fact").fill("I live in Porto")
    home.get_by_role("textbox", name="Corrected fact").press("Enter")
    porto = fact_item(page, "I live in Porto.")
    expect(porto).to_have_attribute("data-state", "current")
    # The old one stays as history under its correction, superseded and muted.
    older = porto.locator(".fact-history li.fact")
    expect(older.locator(".fact-text")).to_have_text("I live in Lisbon.")
    expect(older.locator(".badge-superseded")).to_have_text(re.compile(r"^superseded by #\d+$"))
    screenshot(page, "facts-page-corrected")

    porto.get_by_role("button", name="Forget").first.click()
    panel = porto.get_by_test_id("forget-panel")
    expect(panel).to_contain_text("2 messages will be deleted")
    expect(panel.get_by_test_id("facts-effect")).to_contain_text("1 fact removed · 1 older fact current again.")
    related = panel.get_by_test_id("related")
    # The older fact of the same subject, and the message it came from: offered, never ticked.
    expect(related.get_by_role("checkbox")).to_have_count(2)
    for box in related.get_by_role("checkbox").all():
        expect(box).not_to_be_checked()
    expect(related).to_contain_text("a fact about Home city")
    screenshot(page, "facts-forget-preview")

    related.locator("li", has_text="says a fact about Home city").get_by_role("checkbox").check()
    delete = panel.get_by_role("button", name=re.compile(r"^Delete \d+ messages$"))
    expect(delete).not_to_have_text("Delete 2 messages")
    expect(related.get_by_role("checkbox", checked=True)).to_have_count(1)
    delete.click()
    expect(page.locator(".toast-success").last).to_contain_text("Forgotten")
    expect(fact_item(page, "I live in Porto.")).to_have_count(0)
    expect(fact_item(page, "I live in Lisbon.")).to_have_count(0)
    executed = DeletionRequest.objects.filter(owner__username="kit", status="executed").order_by("-pk").first()
    assert lisbon.pk in executed.matched_ids
    assert Message.objects.get(pk=lisbon.pk).status == "deleted"
    assert not Message.objects.filter(
        owner__username="kit", role="fact", status="active", content__contains="Home city"
    )
    # The preview made before the tick was cancelled, not left behind.
    assert DeletionRequest.objects.filter(owner__username="kit", status="previewed").count() == 0
    screenshot(page, "facts-page-after")

    phone = open_page(width=390, height=900)
    sign_in(phone, "kit")
    phone.goto("/facts/")
    expect(fact_item(phone, "My dog is called Biscuit")).to_be_visible()
    assert phone.evaluate("() => document.documentElement.scrollWidth") <= 390
    fact_item(phone, "My dog is called Biscuit").get_by_role("button", name="Forget").click()
    expect(phone.get_by_test_id("forget-panel").get_by_role("button", name=re.compile("^Delete"))).to_be_visible()
    screenshot(phone, "facts-page-390")


def test_the_chat_card_shows_the_facts_effect_and_offers_related_information_unticked(signed_in):
    page = signed_in("lou")
    send(page, "I live in Lisbon.")
    send(page, "I moved to Porto last month.")
    wait_for_facts("lou", 2)
    porto = Message.objects.get(owner__username="lou", role="user", content__startswith="I moved to Porto")

    card = ask_to_forget(page, "Forget that I moved to Porto")
    expect(card.get_by_test_id("facts-effect")).to_contain_text("1 fact removed · 1 older fact current again.")
    related = card.get_by_test_id("related")
    lisbon = related.locator("li", has_text="says a fact about Home city").get_by_role("checkbox")
    expect(lisbon).not_to_be_checked()
    first = card.get_attribute("data-deletion")
    summary = card.locator(".dcard-summary strong")
    before = summary.inner_text()
    screenshot(page, "chat-card-facts-related")

    # Ticking makes a new preview of what was asked plus the ticked message, in the same card.
    lisbon.check()
    expect(card).not_to_have_attribute("data-deletion", first)
    expect(summary).not_to_have_text(before)
    # The fact drawn from the ticked message is in the new preview now: no longer offered.
    expect(related.get_by_role("checkbox")).to_have_count(1)
    expect(related.get_by_role("checkbox", checked=True)).to_have_count(1)
    fresh = DeletionRequest.objects.get(pk=int(card.get_attribute("data-deletion")))
    asked = DeletionRequest.objects.get(pk=int(first))
    lisbon_said = Message.objects.get(owner__username="lou", role="user", content="I live in Lisbon.")
    assert porto.pk in asked.matched_ids and lisbon_said.pk not in asked.matched_ids
    assert sorted(fresh.matched_ids) == sorted([*asked.matched_ids, lisbon_said.pk])
    assert asked.status == "cancelled"
    screenshot(page, "chat-card-facts-ticked")
