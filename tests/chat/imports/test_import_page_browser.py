"""The import flow in real Chromium: upload a ChatGPT export, watch it, open it, preview a conservative cascade."""

import io
import json
import zipfile
from pathlib import Path

import pytest
from playwright.sync_api import expect

from chat.models import Message
from lab.bench.imports import chatgpt_export
from tests.helpers import FIXTURES
from tests.pages import ask_to_forget, explorer, screenshot, wait_graph_ready

pytestmark = [pytest.mark.browser, pytest.mark.worker]

FIXTURE = FIXTURES / "chatgpt_conversations.json"

# Records every status the progress section shows, so a short one is still seen.
WATCH_PROGRESS = """() => {
  window.importStatuses = [];
  const box = document.querySelector("[data-import-progress]");
  new MutationObserver(() => {
    const status = box.dataset.status;
    if (status && window.importStatuses.at(-1) !== status) window.importStatuses.push(status);
  }).observe(box, { attributes: true, attributeFilter: ["data-status"] });
}"""


def export_zip(tmp_path: Path) -> Path:
    """A ChatGPT export zip: the hand-written conversations plus 30 generated ones (600 messages)."""
    conversations = json.loads(FIXTURE.read_text()) + json.loads(chatgpt_export(conversations=30, per_conversation=20))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("conversations.json", json.dumps(conversations))
        archive.writestr("chat.html", "<html></html>")
        archive.writestr("user.json", "{}")
    path = tmp_path / "chatgpt-export.zip"
    path.write_bytes(buffer.getvalue())
    return path


def test_upload_chatgpt_export_open_it_and_preview_a_conservative_cascade(signed_in, tmp_path):
    page = signed_in("dora")
    page.get_by_role("link", name="Import ChatGPT or Claude history").click()
    page.wait_for_url("**/import/")
    page.evaluate(WATCH_PROGRESS)
    page.get_by_label("File").set_input_files(export_zip(tmp_path))
    page.get_by_role("button", name="Import").click()

    counts = page.get_by_test_id("import-counts")
    expect(counts).to_have_text(
        # Linear edges (chat/lineage.py): every message but a conversation's last feeds exactly one reply.
        "608 messages imported, 576 provenance edges; 32 conversations from ChatGPT.",
        timeout=60_000,
    )
    statuses = page.evaluate("() => window.importStatuses")
    assert statuses[0] == "pending" and statuses[-1] == "done"
    assert page.evaluate("() => document.querySelector('[data-import-bar]').value") == 608
    screenshot(page, "import-done")

    page.get_by_role("link", name="Trip to Lisbon").click()
    page.wait_for_url("**/?thread=*")
    messages = page.locator("[data-messages] > .msg")
    expect(messages).to_have_count(6)
    expect(messages.locator(".badge-imported")).to_have_count(6)
    # Shown at the time it was said in ChatGPT, not when it was imported.
    first = Message.objects.filter(owner__username="dora", thread__title="Trip to Lisbon").order_by("seq").first()
    shown = messages.nth(0).locator("time").get_attribute("datetime")
    assert shown.startswith(first.source_created_at.strftime("%Y-%m-%dT%H:%M"))
    expect(messages.nth(5).locator(".chips-label")).to_have_text(
        "Imported reply: provenance unknown, so every earlier message of this conversation counts as its source"
    )
    screenshot(page, "import-thread")

    hotel = Message.objects.get(owner__username="dora", source_id="aaa2d4e5-u2")
    card = ask_to_forget(page, f"delete message {hotel.seq}")
    expect(card.locator(".ditem")).to_have_count(3)
    expect(card.locator(".imported-note")).to_have_text(
        "2 imported replies will go: their provenance is unknown, so every later reply of that conversation "
        "is treated as derived."
    )
    later = [Message.objects.get(owner__username="dora", source_id=key).pk for key in ("f7a8b9c0-a2", "0a1b2c3d-a3")]
    assert [int(item.get_attribute("data-id")) for item in card.locator(".ditem").all()] == [hotel.pk, *later]
    expect(card.locator(".ditem .badge-imported")).to_have_count(3)
    screenshot(page, "import-cascade-preview")

    # The graph marks imported messages (a double border: provenance unknown).
    page.goto(f"/graph/?focus={hotel.pk}")
    wait_graph_ready(page)
    assert explorer(page, f"x.node({hotel.pk}).data('imported')") == "yes"
    assert explorer(page, "x.cy.nodes('[imported = \"yes\"]').length") == 608
    assert explorer(page, f"x.node({hotel.pk}).style('border-style')") == "double"
    screenshot(page, "import-graph")
