"""A fact in the graph page: its own shape and colour, its legend entry, its fact edge drawn as its own kind."""

import pytest
from playwright.sync_api import expect

from chat.facts.extract import facts_extract_pass
from chat.models import Message
from tests.factories import make_message, make_thread, make_user
from tests.pages import explorer, screenshot, sign_in, wait_graph_ready

pytestmark = [pytest.mark.browser]


def test_a_fact_is_drawn_as_its_own_node_and_edge_kind(open_page, transactional_db):
    owner = make_user("fiona")
    source = make_message(make_thread(owner, "Moving"), "I live in Lisbon near the river.")
    facts_extract_pass(owner_id=owner.pk)
    fact = Message.objects.get(owner=owner, role="fact")
    page = open_page()
    sign_in(page, "fiona")

    page.goto("/graph/")
    wait_graph_ready(page)

    assert explorer(page, f"x.node({fact.pk}).style('shape')") == "star"
    assert explorer(page, f"x.node({fact.pk}).style('background-color')") == "rgb(21,128,61)"
    assert explorer(page, f"x.node({source.pk}).style('shape')") == "round-rectangle"
    fact_edges = "x.cy.edges('[signal = \"fact\"]').map((e) => [e.data('source'), e.style('line-color')])"
    assert explorer(page, fact_edges) == [[str(source.pk), "rgb(21,128,61)"]]
    legend = page.get_by_role("list", name="Legend")
    expect(legend).to_contain_text("fact")
    expect(legend).to_contain_text("fact drawn from")
    screenshot(page, "graph-fact")
