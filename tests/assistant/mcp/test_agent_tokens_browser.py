"""Agent tokens in the web app, in Chromium: make one (its secret shown once), see it listed, revoke it."""

import pytest
from playwright.sync_api import expect

from assistant.mcp.server import token_user
from assistant.models import AgentToken
from tests.factories import make_user
from tests.pages import screenshot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("width", [1280, 390])
def test_the_user_makes_and_revokes_an_agent_token_on_the_deletions_page(open_page, width):
    owner = make_user(f"agents{width}")
    page = open_page(width=width)
    sign_in(page, owner.username)
    page.goto("/deletions/")
    expect(page.get_by_text("No agent holds a token.")).to_be_visible()
    page.get_by_label("Agent", exact=True).fill("Claude Desktop")
    page.get_by_role("button", name="Make a token").click()
    secret = page.get_by_label("Token of Claude Desktop")
    expect(secret).to_be_visible()
    assert token_user(f"Bearer {secret.input_value()}".encode()) == owner.pk
    row = page.locator("[data-agent-tokens] tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("Claude Desktop")
    screenshot(page, f"agent-tokens-{width}")
    row.get_by_role("button", name="Revoke").click()
    page.get_by_role("dialog").get_by_role("button", name="Revoke").click()
    expect(page.get_by_text("No agent holds a token.")).to_be_visible()
    assert AgentToken.objects.filter(owner=owner).count() == 0
    assert token_user(f"Bearer {secret.input_value()}".encode()) is None
