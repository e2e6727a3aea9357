"""The graph's deletion preview when part of Dep(m) is removed already, in Chromium."""

import pytest
from playwright.sync_api import expect

from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview
from tests.factories import make_edge, make_message, make_thread, make_user
from tests.pages import click_node, explorer, nodes_under_legend, sign_in, wait_graph_ready

pytestmark = pytest.mark.browser


def test_a_preview_counts_only_what_it_removes_and_names_what_is_gone_already(open_page, transactional_db):
    user = make_user("gale")
    thread = make_thread(user, "Pets")
    fact = make_message(thread, "My cat is called Pixel.")
    kept, gone = (make_message(thread, text, role="assistant") for text in ("Noted: Pixel.", "Pixel is a nice name."))
    make_edge(fact, kept)
    make_edge(fact, gone)
    earlier = deletion_preview(owner=user, actor=user, mode="soft", ids=[gone.pk])
    deletion_confirm(deletion_id=earlier.pk, owner_id=user.pk, confirmed_by=user)

    page = open_page()
    sign_in(page, "gale")
    page.get_by_role("link", name="Memory graph").click()
    wait_graph_ready(page)
    # Enter right after typing finds what was typed, not what the previous search found.
    find = page.get_by_role("searchbox", name="Find")
    find.fill("Pixel")
    expect(page.locator(".search-count")).to_have_text("2 matches")
    find.fill(f"#{kept.seq}")
    find.press("Enter")
    expect(page.locator(".explorer-panel")).to_contain_text(f"#{kept.seq}")
    assert explorer(page, "x.selected") == kept.pk
    # The removed reply is not drawn ("Show deleted" is off), yet it is in Dep(m).
    click_node(page, fact.pk)
    panel = page.locator(".explorer-panel")
    panel.get_by_role("button", name="Preview delete").click()
    summary = panel.locator(".preview-summary")
    expect(summary).to_contain_text(f"Deleting #{fact.seq} removes 2 messages")
    expect(summary).to_contain_text("1 message built from it is deleted already.")
    expect(panel.locator(f".dep-list [data-id='{gone.pk}']")).to_contain_text("(deleted already)")
    expect(panel.locator(f".dep-list [data-id='{kept.pk}']")).to_contain_text("Noted: Pixel.")
    # A purge also destroys the soft-deleted reply's text: its confirmation counts it.
    panel.get_by_label("Purge").check()
    panel.get_by_role("button", name="Delete 2 messages…").click()
    dialog = page.get_by_role("dialog", name="Delete 3 messages?")
    dialog.get_by_role("button", name="Delete 3 messages").click()
    expect(page.locator(".toast-success")).to_contain_text("3 messages deleted")


def test_on_a_phone_the_previewed_nodes_stay_above_the_panel(open_page, transactional_db):
    user = make_user("hale")
    thread = make_thread(user, "Pets")
    fact = make_message(thread, "My dog is called Rex.")
    for text in ("Noted: Rex.", "Rex is a good name.", "Say hi to Rex."):
        make_edge(fact, make_message(thread, text, role="assistant"))
    page = open_page(width=390, height=844)
    sign_in(page, "hale")
    page.get_by_role("link", name="Memory graph").click()
    wait_graph_ready(page)
    click_node(page, fact.pk)
    panel = page.locator(".explorer-panel")
    panel.get_by_role("button", name="Preview delete").click()
    expect(panel.locator(".preview-summary")).to_contain_text("removes 4 messages")
    page.wait_for_timeout(400)  # the 250 ms fit
    canvas, box = page.locator(".explorer-canvas").bounding_box(), panel.bounding_box()
    lowest = explorer(page, "Math.max(...x.cy.nodes('.dep, .dep-root').map((n) => n.renderedBoundingBox().y2))")
    assert canvas["y"] + lowest <= box["y"]


def test_the_graph_opens_and_fits_clear_of_its_legend(open_page, transactional_db):
    # Twelve messages used by one reply: a tall column, fitted by its height, down to where the legend is.
    user = make_user("ivy")
    thread = make_thread(user, "Notes")
    facts = [make_message(thread, f"Fact number {n}.") for n in range(12)]
    reply = make_message(thread, "All noted.", role="assistant")
    for fact in facts:
        make_edge(fact, reply)
    page = open_page()
    sign_in(page, "ivy")
    page.get_by_role("link", name="Memory graph").click()
    wait_graph_ready(page)
    assert nodes_under_legend(page) == 0
    explorer(page, "(x.cy.zoom(0.2), true)")
    page.get_by_role("button", name="Fit").click()
    page.wait_for_function("() => !document.querySelector('[data-graph-page]').explorer.cy.animated()")
    assert nodes_under_legend(page) == 0
    assert explorer(page, "x.cy.zoom()") > 0.5


def test_find_reaches_words_past_the_labels(open_page, transactional_db):
    user = make_user("jade")
    thread = make_thread(user, "Trips")
    far = make_message(thread, "We drove for hours through the hills, and at last we reached Zanzibar")
    make_message(thread, "A short one.")
    page = open_page()
    sign_in(page, "jade")
    page.get_by_role("link", name="Memory graph").click()
    wait_graph_ready(page)
    assert "zanzibar" not in explorer(page, f"x.node({far.pk}).data('label')").lower()
    # Enter at once: no label holds the word, so Find waits for what the messages say.
    find = page.get_by_role("searchbox", name="Find")
    find.fill("Zanzibar")
    find.press("Enter")
    expect(page.locator(".explorer-panel")).to_contain_text(f"#{far.seq}")
    assert explorer(page, "x.selected") == far.pk
    expect(page.locator(".search-count")).to_have_text("1 match")
