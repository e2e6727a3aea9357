"""Erasing one's account in the web app, in Chromium: the confirmation says what goes and asks for the username."""

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from provenance.models import AccountErasure
from tests.factories import make_message, make_thread, make_user
from tests.pages import screenshot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_user_erases_their_account_from_the_deletions_page(open_page):
    owner = make_user("leaving")
    thread = make_thread(owner)
    for text in ("I live in Lyon", "My dog is Biscuit"):
        make_message(thread, text)
    page = open_page()
    sign_in(page, owner.username)
    page.goto("/deletions/")
    page.get_by_role("button", name="Erase my account…").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("1 thread")
    expect(dialog).to_contain_text("2 messages")
    screenshot(page, "account-erasure")
    # A wrong username: refused, nothing erased.
    dialog.get_by_label("Your username").fill("someone")
    dialog.get_by_role("button", name="Erase everything").click()
    expect(page.get_by_text("Type the account's username to confirm its erasure.")).to_be_visible()
    assert get_user_model().objects.filter(pk=owner.pk).exists()
    page.get_by_role("button", name="Erase my account…").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("Your username").fill(owner.username)
    dialog.get_by_role("button", name="Erase everything").click()
    page.wait_for_url("**/accounts/login/?erased=1")
    expect(page.get_by_text("Your account and everything in it are erased.")).to_be_visible()
    assert not get_user_model().objects.filter(pk=owner.pk).exists()
    assert AccountErasure.objects.get(owner_id=owner.pk).counts["chat_message"] == 2
