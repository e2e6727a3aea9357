"""An agent's note (MCP `remember`) in the web app: its own shape in the graph, a legend entry, its byline."""

import re

import pytest
from playwright.sync_api import expect

from assistant import agents
from tests.browser.pages import explorer, screenshot, sign_in, wait_graph_ready
from tests.factories import make_message, make_thread, make_user

pytestmark = [pytest.mark.browser]


def test_an_agents_note_has_its_own_style_and_legend(open_page, transactional_db):
    owner = make_user("nina")
    source = make_message(make_thread(owner, "Moving"), "I moved to Lyon in May")
    note = agents.remember(user=owner, client="test-agent", text="Nina lives in Lyon", derived_from=[source.pk])
    page = open_page()
    sign_in(page, "nina")

    page.goto("/graph/")
    wait_graph_ready(page)

    assert explorer(page, f"x.node({note['id']}).style('shape')") == "tag"
    assert explorer(page, f"x.node({source.pk}).style('shape')") == "round-rectangle"
    expect(page.get_by_role("list", name="Legend")).to_contain_text("agent note")
    screenshot(page, "graph-agent-note")
    page.goto("/")
    page.get_by_text("Agent notes").first.click()
    expect(page.locator(f"#m-{note['id']} .msg-author")).to_have_text(re.compile("Agent note"))
