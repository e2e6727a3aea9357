"""The admin's graph page in real Chromium: the explorer mounts read-only, under the Content-Security-Policy."""

import pytest
from django.test import Client
from django.urls import reverse

from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview
from tests.factories import make_edge, make_message, make_thread, make_user

pytestmark = pytest.mark.browser


def test_admin_graph_page_shows_the_users_graph_read_only(open_page, live_server, transactional_db):
    owner = make_user("alice")
    staff = make_user("root", is_staff=True, is_superuser=True)
    thread = make_thread(owner, "main")
    fact = make_message(thread, "I live in Lyon")
    reply = make_message(thread, "Noted: Lyon", role="assistant")
    make_edge(fact, reply, rank=0, score=1.0)
    kept = make_message(thread, "I like jasmine tea")
    preview = deletion_preview(owner=owner, actor=owner, mode="purge", ids=[fact.pk])
    deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)

    session = Client()
    session.force_login(staff)
    page = open_page()
    page.context.add_cookies(
        [{"name": "sessionid", "value": session.cookies["sessionid"].value, "url": live_server.url}]
    )
    page.goto(reverse("admin:provenance_deletionrequest_graph", args=[owner.pk]))
    host = page.locator('[data-admin-graph][data-ready="true"]')
    host.wait_for()
    # The explorer's stylesheet leaves the admin's header as the admin draws it (its own --accent).
    assert page.evaluate("() => getComputedStyle(document.querySelector('#site-name a')).color") == "rgb(245, 221, 93)"

    def nodes():
        return page.evaluate("() => document.querySelector('[data-admin-graph]').explorer.cy.nodes().map(n => n.id())")

    assert nodes() == [str(kept.pk)]
    page.get_by_text("Show deleted").click()
    page.wait_for_function("() => document.querySelector('[data-admin-graph]').explorer.cy.nodes().length === 3")
    assert sorted(nodes()) == sorted(str(m.pk) for m in (fact, reply, kept))

    page.evaluate(f"() => document.querySelector('[data-admin-graph]').explorer.select({fact.pk})")
    page.get_by_text("Purged: the text was destroyed.").wait_for()
    assert page.locator("[data-action=preview-delete]").count() == 0
    assert "Lyon" not in page.locator(".explorer-panel").inner_text()
