"""A long thread in the chat page: the newest page first, earlier ones on scroll-up or "Load earlier"."""

import pytest
from playwright.sync_api import expect

from tests.factories import make_long_thread, make_user
from tests.pages import sign_in, wait_graph_ready

pytestmark = pytest.mark.browser

SHOTS = "/tmp/thread-page-shots"


def _seqs(page) -> list[int]:
    return [
        int(seq)
        for seq in page.locator("[data-messages] > .msg").evaluate_all("(items) => items.map((i) => i.dataset.seq)")
    ]


def test_a_long_thread_opens_on_its_newest_page_and_loads_earlier_ones(open_page, transactional_db):
    owner = make_user("lena")
    thread, ids = make_long_thread(owner, 120, 3)
    page = open_page()
    sign_in(page, "lena")
    page.goto(f"/?thread={thread.pk}")
    items = page.locator("[data-messages] > .msg")
    expect(items).to_have_count(50)
    assert _seqs(page) == list(range(71, 121))
    button = page.get_by_role("button", name="Load earlier messages")
    expect(button).to_be_visible()
    page.screenshot(path=f"{SHOTS}/1-newest-page.png")

    # Scrolling to the top loads the page before; the message that was on top stays in view.
    page.locator("[data-scroll]").evaluate("(el) => el.scrollTo({ top: 0, behavior: 'instant' })")
    expect(items).to_have_count(100)
    assert _seqs(page) == list(range(21, 121))
    expect(page.locator(f"#m-{ids[71]}")).to_be_in_viewport()
    page.screenshot(path=f"{SHOTS}/2-after-scroll-up.png")

    # Once more: the rest loads; the thread's start is reached and the button goes.
    page.locator("[data-scroll]").evaluate("(el) => el.scrollTo({ top: 0, behavior: 'instant' })")
    expect(items).to_have_count(120)
    expect(button).to_be_hidden()
    assert _seqs(page) == list(range(1, 121))
    page.screenshot(path=f"{SHOTS}/3-whole-thread.png")


def test_load_earlier_button_the_graph_and_a_link_into_an_early_page(open_page, transactional_db):
    owner = make_user("milo")
    thread, ids = make_long_thread(owner, 120, 3)
    page = open_page()
    sign_in(page, "milo")
    page.goto(f"/?thread={thread.pk}")
    items = page.locator("[data-messages] > .msg")
    expect(items).to_have_count(50)
    page.get_by_role("button", name="Load earlier messages").click()
    expect(items).to_have_count(100)
    assert _seqs(page)[:2] == [21, 22]

    # The graph page still draws the thread whole: it reads /api/graph/, not the thread's pages.
    page.goto(f"/graph/?focus={ids[120]}")
    wait_graph_ready(page)
    assert page.evaluate("() => document.querySelector('[data-graph-page]').explorer.cy.nodes().length") == 120
    page.screenshot(path=f"{SHOTS}/5-graph.png")

    # "Open in chat" there links to #m-<id>: earlier pages load until it is there.
    page.goto(f"/?thread={thread.pk}#m-{ids[5]}")
    target = page.locator(f"#m-{ids[5]}")
    expect(target).to_be_in_viewport()
    expect(items).to_have_count(120)
    page.screenshot(path=f"{SHOTS}/4-linked-early-message.png")
