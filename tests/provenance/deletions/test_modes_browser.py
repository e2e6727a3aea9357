"""The other deletion modes and a failed reply, through the browser app with a real worker."""

from datetime import datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import expect

from chat.models import Message, Turn
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview
from provenance.models import DeletionRequest
from tests.factories import make_edge, make_message, make_thread
from tests.fake_openai import FakeOpenAI
from tests.pages import ask_to_forget, click_node, screenshot, send, wait_graph_ready

pytestmark = [pytest.mark.browser, pytest.mark.worker]

TWO_HOURS_AHEAD = """() => {
  const at = new Date(Date.now() + 2 * 3600 * 1000);
  at.setSeconds(0, 0);
  const pad = (n) => String(n).padStart(2, "0");
  const day = `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())}`;
  const local = `${day}T${pad(at.getHours())}:${pad(at.getMinutes())}`;
  return [local, at.toISOString()];
}"""


def test_failed_reply_shows_why_and_retries(signed_in):
    with FakeOpenAI(default_text="Hello from the fake model.") as fake:
        fake.script = [("status", 400)]
        page = signed_in("erin", {"DELLM_LLM": "openai", "OPENAI_BASE_URL": fake.url, "OPENAI_API_KEY": "k"})

        failed = send(page, "Are you there?")
        expect(failed).to_have_class("msg msg-assistant msg-failed")
        expect(failed.locator(".msg-body")).to_contain_text("The language model answered HTTP 400.")
        turn = Turn.objects.get(owner__username="erin")
        assert (turn.status, turn.user_message.status) == ("failed", "active")
        screenshot(page, "chat-failed-turn")

        failed.get_by_role("button", name="Retry").click()
        reply = page.locator(".msg-assistant:not(.msg-pending):not(.msg-failed)")
        expect(reply).to_have_count(1, timeout=30_000)
        expect(reply.locator(".msg-body")).to_contain_text("Hello from the fake model.")
        expect(page.locator(".msg-failed")).to_have_count(0)
        turn.refresh_from_db()
        assert (turn.status, turn.error, turn.reply.content) == ("done", "", "Hello from the fake model.")
        assert len(fake.requests) == 2


def test_purge_from_the_graph_destroys_the_text_of_dep(signed_in):
    page = signed_in("frank")
    send(page, "My locker code at the pool is 4321.")
    answer = send(page, "What is my locker code at the pool?")
    expect(answer.locator(".msg-body")).to_contain_text("4321")
    code = Message.objects.get(owner__username="frank", seq=1)

    page.get_by_role("link", name="Memory graph").click()
    wait_graph_ready(page)
    click_node(page, code.pk)
    panel = page.locator(".explorer-panel")
    panel.get_by_role("button", name="Preview delete").click()
    total = int(panel.locator(".preview-summary [data-count]").get_attribute("data-count"))
    assert total >= 2
    panel.get_by_label("Purge").check()
    panel.get_by_role("button", name=f"Delete {total} messages…").click()
    dialog = page.get_by_role("dialog", name=f"Delete {total} messages?")
    expect(dialog).to_contain_text("Purged text cannot be recovered.")
    screenshot(page, "graph-purge-confirm")
    dialog.get_by_role("button", name=f"Delete {total} messages").click()
    expect(page.locator(".toast-success")).to_contain_text(f"{total} messages deleted")

    deletion = DeletionRequest.objects.get(owner__username="frank")
    assert (deletion.mode, deletion.status, len(deletion.deleted_ids)) == ("purge", "executed", total)
    purged = Message.objects.filter(pk__in=deletion.deleted_ids)
    assert set(purged.values_list("status", "content")) == {("purged", "")}
    assert not Message.objects.filter(content__contains="4321").exists()

    # The history offers no undo for a purge.
    page.get_by_role("link", name="Deletions").click()
    row = page.locator(f'tr[data-deletion="{deletion.pk}"]')
    expect(row).to_contain_text("Purge")
    expect(row.get_by_role("button", name="Undo")).to_have_count(0)


def test_expire_from_the_chat_card_schedules_and_refuses_a_past_time(signed_in):
    page = signed_in("gina")
    send(page, "My gym is on Baker Street.")
    send(page, "Where is my gym?")

    card = ask_to_forget(page, "Forget that my gym is on Baker Street")
    preview = DeletionRequest.objects.get(owner__username="gina")
    planned = sorted(preview.matched_ids + preview.dependent_ids)

    sent = []
    page.on("request", lambda request: "/api/deletions/" in request.url and sent.append(request.url))
    card.get_by_label("Expire later").check()
    when = card.get_by_label("Delete at", exact=True)
    when.fill("2020-01-01T09:00")
    card.get_by_role("button", name=f"Delete {len(planned)} messages").click()
    # The field's own minimum stops the form: the browser points at it, nothing is sent.
    assert when.evaluate("(field) => field.validity.rangeUnderflow")
    page.wait_for_timeout(300)
    assert sent == []
    assert list(DeletionRequest.objects.values_list("status", flat=True)) == ["previewed"]
    assert set(Message.objects.filter(pk__in=planned).values_list("status", flat=True)) == {"active"}

    # Two hours ahead, written in the browser's own time zone as the field expects.
    local, instant = page.evaluate(TWO_HOURS_AHEAD)
    when.fill(local)
    card.get_by_role("button", name=f"Delete {len(planned)} messages").click()
    expect(card).to_contain_text("These messages will be deleted at")
    screenshot(page, "chat-deletion-scheduled")

    scheduled = DeletionRequest.objects.get(owner__username="gina", status="scheduled")
    assert scheduled.mode == "expire"
    assert scheduled.expire_at == datetime.fromisoformat(instant)
    # Only the matches are marked; Dep is recomputed when the deletion fires.
    assert sorted(scheduled.matched_ids) == sorted(preview.matched_ids)
    statuses = dict(Message.objects.filter(owner__username="gina").values_list("pk", "status"))
    assert {statuses[pk] for pk in scheduled.matched_ids} == {"expiring"}
    assert {statuses[pk] for pk in statuses if pk not in scheduled.matched_ids} <= {"active"}
    assert DeletionRequest.objects.get(pk=preview.pk).status == "cancelled"
    # The history shows its time in the browser's zone, under its status, not the outcome's UTC text.
    page.get_by_role("link", name="Deletions").click()
    row = page.locator(f"tr[data-deletion='{scheduled.pk}']")
    expect(row.locator(".outcome")).to_have_text("Scheduled.")
    expect(row.locator("[data-label='Status'] time")).to_have_count(1)


def test_an_expired_message_leaves_the_open_chat_page(signed_in):
    page = signed_in("gwen")
    user = User.objects.get(username="gwen")
    thread = make_thread(user, "Plans")
    fact = make_message(thread, "My locker code is 4321.")
    reply = make_message(thread, "Noted: 4321.", role="assistant")
    make_edge(fact, reply)
    kept = make_message(thread, "I like tea.")
    deletion = deletion_preview(
        owner=user, actor=user, mode="expire", ids=[fact.pk], expire_at=timezone.now() + timedelta(seconds=5)
    )
    deletion_confirm(deletion_id=deletion.pk, owner_id=user.pk, confirmed_by=user)
    page.goto(f"/?thread={thread.pk}")
    expect(page.locator(f"#m-{fact.pk} .badge-scheduled")).to_have_text("expiring")
    # The worker fires it at its time; the open page reads the deletion then and takes Dep(m) off, no reload.
    expect(page.locator(f"#m-{fact.pk}")).to_have_count(0, timeout=30_000)
    expect(page.locator(f"#m-{reply.pk}")).to_have_count(0)
    expect(page.locator(f"#m-{kept.pk}")).to_be_visible()
    assert set(Message.objects.filter(pk__in=[fact.pk, reply.pk]).values_list("status", flat=True)) == {"purged"}
