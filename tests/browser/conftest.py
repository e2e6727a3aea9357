"""Real Chromium (Debian's) driven by Playwright against pytest-django's live server.

Each page fails its test on any console error or uncaught exception, which
includes Content-Security-Policy violations. Screenshots go to
test-artifacts/screenshots/ (ignored by git).
"""

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from provenance.bench.live import CHROMIUM
from tests.factories import make_user
from tests.worker.conftest import start_worker  # noqa: F401 (a fixture, reused here)

# Playwright's sync API runs an event loop in this thread; Django's ORM would
# refuse to run next to it, although every ORM call here is synchronous.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
PASSWORD = "pw-for-tests"


@pytest.fixture(scope="session")
def chromium():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs it (apt-get install chromium).")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class BrowserErrors(list):
    def watch(self, page):
        page.on("console", lambda message: message.type == "error" and self.append(f"console: {message.text}"))
        page.on("pageerror", lambda error: self.append(f"pageerror: {error}"))


@pytest.fixture
def open_page(chromium, live_server):
    """`open_page(width=1280)` -> a fresh signed-out page; fails the test on any console error."""
    contexts = []
    errors = BrowserErrors()

    def open_(width: int = 1280, height: int = 860):
        context = chromium.new_context(viewport={"width": width, "height": height}, base_url=live_server.url)
        context.set_default_timeout(15_000)
        contexts.append(context)
        page = context.new_page()
        errors.watch(page)
        return page

    yield open_
    for context in contexts:
        context.close()
    assert errors == [], "errors in the browser console"


@pytest.fixture
def signed_in(open_page, start_worker, transactional_db):  # noqa: F811 (start_worker is the fixture)
    """`signed_in(username, worker_env=None)` -> a page signed in as a new user, a worker serving its turns."""

    def open_(username: str, worker_env: dict | None = None):
        make_user(username)
        start_worker(worker_env)
        page = open_page()
        sign_in(page, username)
        return page

    return open_


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
