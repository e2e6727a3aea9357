"""Page helpers for the browser tests (the fixtures are in tests/conftest.py)."""

from pathlib import Path

from playwright.sync_api import expect

SCREENSHOTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "screenshots"
PASSWORD = "pw-for-tests"


def sign_in(page, username: str, password: str = PASSWORD):
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/")


def screenshot(page, name: str):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / f"{name}.png")


def explorer(page, expression: str):
    """Evaluate `expression` against the graph page's GraphExplorer (`x`)."""
    return page.evaluate(
        f"() => {{ const x = document.querySelector('[data-graph-page]').explorer; return {expression}; }}"
    )


def wait_graph_ready(page):
    page.locator("[data-graph-page][data-ready=true]").wait_for()


def send(page, text: str):
    """Type a message, send it with Enter, wait for the reply to replace the pending bubble."""
    replies = page.locator(".msg-assistant:not(.msg-pending)")
    before = replies.count()
    page.get_by_role("textbox", name="Message").fill(text)
    page.get_by_role("textbox", name="Message").press("Enter")
    expect(replies).to_have_count(before + 1, timeout=30_000)
    return replies.last


def chip_ids(reply) -> list[int]:
    return [int(chip.get_attribute("data-id")) for chip in reply.locator(".chip").all()]


def click_node(page, message_id: int):
    box = page.locator(".explorer-canvas").bounding_box()
    position = explorer(page, f"x.node({message_id}).renderedPosition()")
    page.mouse.click(box["x"] + position["x"], box["y"] + position["y"])


def ask_to_forget(page, text: str):
    """Type a deletion request; return its card once the preview is listed."""
    page.get_by_role("textbox", name="Message").fill(text)
    page.get_by_role("textbox", name="Message").press("Enter")
    card = page.get_by_role("group", name="Forget request")
    expect(card.locator(".ditem").first).to_be_visible()
    return card


def nodes_under_legend(page) -> int:
    """How many of the graph's visible nodes reach below the top of its legend."""
    return explorer(
        page,
        "(() => { const top = x.dom.legend.getBoundingClientRect().top - x.dom.canvas.getBoundingClientRect().top;"
        " return x.cy.nodes(':visible').filter((node) => node.renderedBoundingBox().y2 > top).size(); })()",
    )
