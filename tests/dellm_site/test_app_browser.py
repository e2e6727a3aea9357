"""End-to-end flows of the browser app in real Chromium, with a real Celery worker."""

import re

import pytest
from playwright.sync_api import expect

from chat.models import Message
from provenance.models import DeletionRequest
from tests.factories import make_user
from tests.helpers import standing_for
from tests.pages import (
    ask_to_forget,
    chip_ids,
    click_node,
    explorer,
    screenshot,
    send,
    sign_in,
    wait_graph_ready,
)

pytestmark = [pytest.mark.browser, pytest.mark.worker]

# Records the classes that appear in the conversation, so a pending state that
# lasts only a moment is still seen.
WATCH_MESSAGES = """() => {
  window.seenClasses = new Set();
  const note = (node) => node.classList && node.classList.forEach((name) => window.seenClasses.add(name));
  new MutationObserver((records) => {
    for (const record of records) {
      note(record.target);
      record.addedNodes.forEach(note);
    }
  }).observe(document.querySelector("[data-messages]"), { childList: true, subtree: true, attributes: true });
}"""


def test_chat_graph_delete_and_undo(open_page, start_worker, transactional_db):
    make_user("carol")
    start_worker()
    page = open_page()
    streams = []
    page.on("request", lambda request: "/events/" in request.url and streams.append(request.url))

    page.goto("/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    screenshot(page, "login")
    sign_in(page, "carol")
    expect(page.get_by_test_id("username")).to_have_text("carol")
    expect(page.get_by_test_id("responder")).to_have_text("offline responder (no LLM)")

    page.evaluate(WATCH_MESSAGES)
    send(page, "I live in Paris and I cycle along the Seine every morning.")
    send(page, "My sister Anna works as a doctor in Lyon.")
    answer = send(page, "Where do I live?")
    assert "msg-pending" in page.evaluate("() => [...window.seenClasses]")
    assert streams, "replies come through the SSE endpoint"
    expect(answer.locator(".msg-body")).to_contain_text("Paris")

    paris = Message.objects.get(seq=1, owner__username="carol")
    reply = Message.objects.get(pk=int(answer.get_attribute("data-id")))
    chips = chip_ids(answer)
    # The Paris message was used, itself or as the fact drawn from it.
    used = Message.objects.get(pk=standing_for(paris.pk, chips))
    assert set(chips) <= {edge.source_id for edge in reply.in_edges.all()}
    chip = answer.locator(f'.chip[data-id="{used.pk}"]')
    expect(chip).to_have_text(f"#{used.seq}")
    # The chip says why the memory was used: the signal its edge recorded.
    signal = reply.in_edges.get(source=used).signal
    assert signal in ("lexical", "vector", "both")
    expect(chip).to_have_attribute("data-signal", signal)
    reason = {"lexical": "same words", "vector": "similar meaning", "both": "same words and similar meaning"}[signal]
    expect(chip).to_have_attribute("title", re.compile(f"used for: {reason};"))
    screenshot(page, "chat")

    # Used memory chip -> the graph, focused on that message.
    chip.click()
    wait_graph_ready(page)
    expect(page.locator(".explorer-panel h2")).to_contain_text(f"#{used.seq}")
    page.keyboard.press("Escape")
    expect(page.locator(".explorer-panel")).to_be_hidden()
    screenshot(page, "graph")

    click_node(page, paris.pk)
    panel = page.locator(".explorer-panel")
    expect(panel).to_be_visible()
    expect(panel.locator(".panel-content")).to_contain_text("I live in Paris")
    panel.get_by_role("button", name="Preview delete").click()
    expect(panel.locator(".preview-summary")).to_be_visible()
    dependents = page.request.get(f"/api/messages/{paris.pk}/dependents/").json()
    dep = sorted([paris.pk, *dependents["ids"]])
    assert dep == sorted([paris.pk] + [item["id"] for item in dependents["dependents"]])  # all listed: few
    assert explorer(page, "x.highlighted()") == dep
    assert len(dep) >= 3
    expect(panel.locator(".dep-list li")).to_have_count(dependents["count"])
    screenshot(page, "graph-preview")

    panel.get_by_role("button", name=f"Delete {len(dep)} messages…").click()
    dialog = page.get_by_role("dialog", name=f"Delete {len(dep)} messages?")
    expect(dialog).to_contain_text("soft delete")
    screenshot(page, "graph-confirm")
    dialog.get_by_role("button", name=f"Delete {len(dep)} messages").click()
    expect(page.locator(".toast-success")).to_contain_text(f"{len(dep)} messages deleted")
    page.wait_for_timeout(400)
    assert explorer(page, f"{dep}.filter((id) => x.node(id).length)") == []
    assert set(Message.objects.filter(pk__in=dep).values_list("status", flat=True)) == {"deleted"}
    screenshot(page, "graph-after-delete")

    # A later reply never draws on what was deleted.
    page.get_by_role("link", name="Chat").click()
    later = send(page, "Where do I live and where do I cycle?")
    assert not set(chip_ids(later)) & set(dep)
    later_reply = Message.objects.get(pk=int(later.get_attribute("data-id")))
    assert not {edge.source_id for edge in later_reply.in_edges.all()} & set(dep)
    for message_id in dep:
        expect(page.locator(f"#m-{message_id}")).to_have_count(0)

    # Undo the soft deletion from the history; the nodes come back.
    deletion = DeletionRequest.objects.get(status="executed")
    page.get_by_role("link", name="Deletions").click()
    row = page.locator(f'tr[data-deletion="{deletion.pk}"]')
    expect(row).to_contain_text("Soft delete")
    expect(row.locator("[data-receipt]")).to_have_attribute("data-receipt", "passed")
    screenshot(page, "deletions")
    row.get_by_role("button", name="Undo").click()
    page.get_by_role("dialog").get_by_role("button", name="Undo").click()
    expect(page.locator(f'tr[data-deletion="{deletion.pk}"]')).to_contain_text("undone")
    assert set(Message.objects.filter(pk__in=dep).values_list("status", flat=True)) == {"active"}
    screenshot(page, "deletions-after-undo")
    page.get_by_role("link", name="Memory graph").click()
    wait_graph_ready(page)
    assert explorer(page, f"{dep}.filter((id) => x.node(id).length)") == dep


def test_a_new_threads_drawn_title_shows_in_the_list_and_header_without_a_reload(signed_in):
    page = signed_in("tina")
    page.get_by_role("button", name="New thread").click()
    item = page.locator('.thread-item[aria-current="true"] .thread-name')
    expect(item).to_have_text(re.compile(r"^Untitled · "))
    send(page, "I live in Lisbon and work as a nurse at the children's hospital.")
    # Drawn by the worker after the reply, cut at the end of a whole phrase.
    expect(item).to_have_text("I live in Lisbon")
    expect(page.locator("[data-thread-title]")).to_have_text("I live in Lisbon")
    screenshot(page, "chat-titled")


def test_typed_deletion_request_goes_through_its_card(signed_in, open_page):
    page = signed_in("dave")
    send(page, "I live in Paris near the canal.")
    send(page, "My favourite food is ramen.")
    send(page, "Where do I live?")

    card = ask_to_forget(page, "Forget that I live in Paris")
    deletion = DeletionRequest.objects.get(owner__username="dave")
    planned = sorted(deletion.matched_ids + deletion.dependent_ids)
    expect(card.locator(".ditem")).to_have_count(min(len(planned), 6))
    if len(planned) > 6:
        card.get_by_role("button", name=f"Show all {len(planned)}").click()
    assert sorted(int(item.get_attribute("data-id")) for item in card.locator(".ditem").all()) == planned
    expect(card.locator(".dcard-summary")).to_contain_text(f"{len(planned)} messages will be deleted")
    assert not Message.objects.filter(content__icontains="forget").exists()
    screenshot(page, "chat-deletion-card")

    card.get_by_label("Soft delete").check()
    card.get_by_role("button", name=f"Delete {len(planned)} messages").click()
    expect(card).to_contain_text(f"{len(planned)} messages deleted")
    # The keyboard stays on the card, on its next action, not back at the top of the page.
    assert page.evaluate("() => document.activeElement.closest('.dcard') !== null")
    for message_id in planned:
        expect(page.locator(f"#m-{message_id}")).to_have_count(0)
    deletion.refresh_from_db()
    assert deletion.status == "executed"
    assert sorted(deletion.deleted_ids) == planned
    assert Message.objects.filter(owner__username="dave", status="active").exclude(pk__in=planned).exists()
    screenshot(page, "chat-deletion-done")

    # The same app at phone width, and the API docs page under the same policy.
    phone = open_page(width=390, height=800)
    sign_in(phone, "dave")
    expect(phone.locator(".msg").first).to_be_visible()
    screenshot(phone, "chat-phone")
    # The threads drawer covers its own button: Escape, or a tap beside it, closes it.
    toggle, drawer = phone.get_by_role("button", name="Threads"), phone.locator("[data-threads-panel]")
    toggle.click()
    expect(drawer).to_have_class(re.compile(r"\bopen\b"))
    phone.keyboard.press("Escape")
    expect(drawer).not_to_have_class(re.compile(r"\bopen\b"))
    expect(toggle).to_be_focused()
    toggle.click()
    phone.mouse.click(370, 400)
    expect(drawer).not_to_have_class(re.compile(r"\bopen\b"))
    expect(toggle).to_have_attribute("aria-expanded", "false")
    phone.get_by_role("link", name="Memory graph").click()
    wait_graph_ready(phone)
    screenshot(phone, "graph-phone")
    page.goto("/api/docs/")
    expect(page.locator(".swagger-ui .info")).to_be_visible()
    screenshot(page, "api-docs")


def test_a_stored_system_prompt_is_shown_as_one(open_page, transactional_db):
    from chat.threads import thread_create
    from chat.turns.run import turn_run
    from chat.turns.start import turn_create

    owner = make_user("erin")
    thread = thread_create(owner=owner, title="Via the API")
    turn = turn_create(thread=thread, content="I live in Paris.", enqueue=False, system="Answer in French.")
    reply = turn_run(turn_id=turn.pk, owner_id=turn.owner_id).reply
    page = open_page()
    sign_in(page, "erin")
    prompt = page.locator(f"#m-{turn.system_message_id}")
    expect(prompt).to_have_class(re.compile(r"\bmsg-system\b"))
    expect(prompt.locator(".msg-author")).to_have_text("System prompt")
    expect(prompt.locator(".chips")).to_have_count(0)
    # The reply names it among what it was written from, and why.
    chip = page.locator(f"#m-{reply.pk} .chip[data-id='{turn.system_message_id}']")
    expect(chip).to_have_attribute("data-signal", "system")
    expect(chip).to_have_attribute(
        "title", re.compile(r"^System prompt: Answer in French\. \(used for: the system prompt")
    )
    screenshot(page, "chat-system-prompt")
    page.get_by_role("link", name="Memory graph").click()
    wait_graph_ready(page)
    assert explorer(page, f"x.node({turn.system_message_id}).style('shape')") == "hexagon"
    expect(page.get_by_role("list", name="Legend")).to_contain_text("system prompt")


def _overlap(a: dict, b: dict) -> bool:
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
    )


@pytest.mark.parametrize("width", [1280, 390])
def test_chat_and_graph_fill_the_window_and_toasts_leave_send_free(open_page, settings, transactional_db, width):
    # `make run`'s development banner sits above the header: the pages still fit the window, nothing scrolls.
    settings.DEBUG = True
    make_user("fern")
    page = open_page(width=width, height=800)
    sign_in(page, "fern")
    expect(page.get_by_test_id("development-mode")).to_be_visible()
    for path in ["/graph/", "/"]:
        page.goto(path)
        assert page.evaluate("() => document.documentElement.scrollHeight") <= 800
    send = page.get_by_role("button", name="Send").bounding_box()
    assert send["y"] + send["height"] <= 800
    page.evaluate("() => import('/static/js/dom.js').then((dom) => dom.toast('Saved.'))")
    expect(page.locator(".toast")).to_be_visible()
    assert not _overlap(page.locator(".toast").bounding_box(), send)
    screenshot(page, f"chat-toast-{width}")


@pytest.mark.parametrize("width", [1280, 390])
def test_every_page_looks_finished_at_desktop_and_phone_width(open_page, transactional_db, width):
    make_user("gale")
    page = open_page(width=width, height=900)
    sign_in(page, "gale")
    pages = [
        ("/", "chat"),
        ("/graph/", "graph"),
        ("/deletions/", "deletions"),
        ("/import/", "import"),
        ("/facts/", "facts"),
    ]
    for path, name in pages:
        page.goto(path)
        page.wait_for_load_state("networkidle")
        # Nothing wider than the window, and each header link on one line.
        assert page.evaluate("() => document.documentElement.scrollWidth") <= width, path
        heights = [box["height"] for box in (link.bounding_box() for link in page.locator(".mainnav a").all())]
        assert max(heights) - min(heights) < 2 and max(heights) < 40, (path, heights)
        # The responder's label is cut with an ellipsis inside the header, never clipped by the window.
        badge = page.locator(".model-badge").bounding_box()
        assert badge["x"] + badge["width"] <= width, path
        screenshot(page, f"page-{name}-{width}")
    # A new user's facts page says what facts are and where they come from.
    page.goto("/facts/")
    expect(page.locator(".empty-state")).to_contain_text("from your own words")
    # The import form: its button clear of the next heading.
    page.goto("/import/")
    button = page.get_by_role("button", name="Import").bounding_box()
    heading = page.get_by_role("heading", name="Earlier imports").bounding_box()
    assert heading["y"] - (button["y"] + button["height"]) >= 16
