"""Agents in the web app: a note's own shape in the graph, its legend entry and byline; the deletions page's
agent-access toggle and the agents that read what a deletion removed."""

import re

import pytest
from playwright.sync_api import expect

from assistant.mcp import tools
from chat.models import AgentAccess
from provenance.deletions.confirm import deletion_confirm
from tests.factories import make_message, make_thread, make_user
from tests.pages import explorer, screenshot, sign_in, wait_graph_ready

pytestmark = [pytest.mark.browser]


def test_an_agents_note_has_its_own_style_and_legend(open_page, transactional_db):
    owner = make_user("nina")
    source = make_message(make_thread(owner, "Moving"), "I moved to Lyon in May")
    note = tools.remember(user=owner, client="test-agent", text="Nina lives in Lyon", derived_from=[source.pk])
    page = open_page()
    sign_in(page, "nina")

    page.goto("/graph/")
    wait_graph_ready(page)

    assert explorer(page, f"x.node({note['id']}).style('shape')") == "round-tag"
    assert explorer(page, f"x.node({source.pk}).style('shape')") == "round-rectangle"
    agent_edges = "x.cy.edges('[signal = \"agent\"]').map((e) => [e.data('source'), e.style('line-style')])"
    assert explorer(page, agent_edges) == [[str(source.pk), "dashed"]]
    expect(page.get_by_role("list", name="Legend")).to_contain_text("agent note")
    screenshot(page, "graph-agent-note")
    page.goto("/")
    page.get_by_text("Agent notes").first.click()
    expect(page.locator(f"#m-{note['id']} .msg-author")).to_have_text(re.compile("Agent note"))


def test_deletions_page_lets_agents_confirm_and_names_the_agents_that_read(open_page, transactional_db):
    owner = make_user("omar")
    source = make_message(make_thread(owner, "Moving"), "I moved to Lyon in May")
    tools.search_memory(user=owner, client="claude-desktop", query="Lyon", k=3)
    answer = tools.forget(user=owner, client="claude-desktop", base_url="http://x", ids=[source.pk])
    deletion_confirm(deletion_id=answer["deletion"]["id"], owner_id=owner.pk, confirmed_by=owner)
    page = open_page()
    sign_in(page, "omar")

    page.goto("/deletions/")
    toggle = page.get_by_label("Let agents (MCP) confirm deletions")
    expect(toggle).to_be_enabled()
    expect(toggle).not_to_be_checked()
    toggle.check()
    expect(page.get_by_text("Agents may now confirm deletions.")).to_be_visible()
    expect(page.locator("[data-agent-reads]")).to_have_text(
        re.compile(
            r"^Read by agents: claude-desktop \(1 memory, 1 read, last \d\d?:\d\d.*\)\. "
            r"DeLLM cannot erase their copies: ask them to forget too\.$"
        )
    )
    screenshot(page, "deletions-agent-reads")

    assert AgentAccess.objects.get(owner=owner).may_confirm_deletions is True


def test_the_deletion_preview_names_the_agents_that_were_shown_each_memory(open_page, transactional_db):
    """The card the MCP `forget` link opens: which agent read which of the memories that would go, and when."""
    owner = make_user("pia")
    thread = make_thread(owner, "Moving")
    lyon = make_message(thread, "I moved to Lyon in May")
    cat = make_message(thread, "My cat Mango sleeps all day")
    tools.search_memory(user=owner, client="claude-desktop", query="Lyon", k=1)
    tools.explain(user=owner, client="cursor", id=lyon.pk)
    tools.explain(user=owner, client="cursor", id=cat.pk)
    answer = tools.forget(user=owner, client="claude-desktop", base_url="http://x", ids=[lyon.pk, cat.pk])
    page = open_page()
    sign_in(page, "pia")

    page.goto(f"/?deletion={answer['deletion']['id']}")
    card = page.get_by_role("group", name="Forget request")
    expect(card.locator("[data-agent-reads]")).to_have_text(
        re.compile(
            r"^Read by agents: cursor \(2 memories, 2 reads, last .+\); claude-desktop \(1 memory, 1 read, last .+\)\. "
            r"DeLLM cannot erase their copies: ask them to forget too\.$"
        )
    )
    expect(card.locator(f'.ditem[data-id="{lyon.pk}"] [data-read-by]')).to_have_text("read by cursor, claude-desktop")
    expect(card.locator(f'.ditem[data-id="{cat.pk}"] [data-read-by]')).to_have_text("read by cursor")
    screenshot(page, "chat-deletion-agent-reads")
