import csv
import io

import pytest
from django.contrib import admin
from django.urls import reverse

from chat.admin import TOMBSTONE
from chat.models import Thread
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview
from provenance.models import DeletionRequest
from tests.factories import KEPT, SECRET_WORD, make_message, make_thread
from tests.helpers import client_for


def custom_pages(history) -> list[str]:
    owner_id = history.secret.owner_id
    return [
        reverse("admin:provenance_deletionrequest_integrity"),
        reverse("admin:provenance_deletionrequest_graph", args=[owner_id]),
        reverse("admin:provenance_deletionrequest_graph_elements", args=[owner_id]) + "?include_deleted=true",
        reverse("admin:provenance_deletionrequest_graph_threads", args=[owner_id]),
        reverse("admin:provenance_deletionrequest_graph_message", args=[owner_id, history.secret.pk]),
        reverse("admin:provenance_deletionrequest_subject_request"),
        reverse("admin:provenance_deletionrequest_review", args=[history.pending.pk]),
        reverse("admin:provenance_deletionrequest_review", args=[history.purge.pk]),
    ]


def every_admin_page(history) -> list[str]:
    """The index, every registered model's list (per status for messages), every object's pages, the staff pages."""
    urls = [reverse("admin:index")]
    for model in admin.site._registry:
        info = f"{model._meta.app_label}_{model._meta.model_name}"
        urls.append(reverse(f"admin:{info}_changelist"))
        for pk in model.objects.values_list("pk", flat=True):
            urls += [reverse(f"admin:{info}_change", args=[pk]), reverse(f"admin:{info}_history", args=[pk])]
    messages = reverse("admin:chat_message_changelist")
    urls += [f"{messages}?status__exact={status}" for status in ("active", "deleted", "purged", "expiring")]
    return urls + custom_pages(history)


def test_no_admin_page_displays_purged_text(staff_client, history):
    pages = every_admin_page(history)
    assert len(pages) > 30
    shown = {}
    for url in pages:
        response = staff_client.get(url)
        assert response.status_code == 200, url
        shown[url] = response.content.decode()
    # The pages do show live text (so the check below can see text at all) ...
    assert KEPT in shown[reverse("admin:chat_message_changelist")]
    # ... and never the purged secret, nor the reply built from it (soft-deleted text: test_removed_text.py).
    assert [url for url, body in shown.items() if SECRET_WORD in body or "tortoise" in body] == []


def test_csv_export_of_the_audit_has_no_purged_text(staff_client, history):
    response = export(staff_client, [history.purge.pk, history.soft.pk, history.pending.pk])
    assert SECRET_WORD not in response.content.decode()


def export(client, ids):
    url = reverse("admin:provenance_deletionrequest_changelist")
    return client.post(url, {"action": "export_csv", "_selected_action": [str(pk) for pk in ids]})


def test_audit_list_shows_who_what_and_the_receipt(staff_client, history, owner):
    response = staff_client.get(reverse("admin:provenance_deletionrequest_changelist"))
    assert response.status_code == 200
    body = response.content.decode()
    # The reply quotes the secret, so the phrase matched it too.
    assert "purged 2 messages (2 matched, 0 dependents)" in body
    assert "soft-deleted 1 message (1 matched, 0 dependents)" in body
    assert body.count('<td class="field-verification">passed</td>') == 2
    assert "Integrity (I1)" in body and "Data-subject request" in body
    assert "Export selected deletions as CSV" in body
    assert "FAILED verification" not in body
    assert "deletionrequest/add/" not in body


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("mode__exact=purge", ["purge"]),
        ("mode__exact=soft", ["pending", "soft"]),
        ("status__exact=previewed", ["pending"]),
        ("status__exact=executed", ["soft", "purge"]),
        ("verification=passed", ["soft", "purge"]),
        ("verification=none", ["pending"]),
        ("on_behalf=yes", []),
        ("on_behalf=no", ["pending", "soft", "purge"]),
        ("selector__exact=exact", ["purge"]),
    ],
)
def test_audit_list_filters(staff_client, history, query, expected):
    response = staff_client.get(reverse("admin:provenance_deletionrequest_changelist") + "?" + query)
    assert response.status_code == 200
    assert [row.pk for row in response.context["cl"].result_list] == [getattr(history, name).pk for name in expected]


def test_audit_list_filters_by_owner_and_date(staff_client, history, other_owner, owner):
    theirs = make_message(make_thread(other_owner), "bob's note")
    theirs = deletion_preview(owner=other_owner, actor=other_owner, mode="soft", ids=[theirs.pk])
    url = reverse("admin:provenance_deletionrequest_changelist")
    mine = staff_client.get(f"{url}?owner__id__exact={owner.pk}").context["cl"].result_list
    assert len(mine) == 3
    assert list(staff_client.get(f"{url}?owner__id__exact={other_owner.pk}").context["cl"].result_list) == [theirs]
    day = history.purge.created_at
    dated = staff_client.get(
        url, {"created_at__year": day.year, "created_at__month": day.month, "created_at__day": day.day}
    )
    assert len(dated.context["cl"].result_list) == 4


def test_audit_detail_is_read_only_and_shows_the_receipt(staff_client, history):
    response = staff_client.get(reverse("admin:provenance_deletionrequest_change", args=[history.purge.pk]))
    assert response.status_code == 200
    body = response.content.decode()
    assert 'name="_save"' not in body and "<textarea" not in body
    for check in ("taint", "gone", "forget", "purge"):
        assert f"<th>{check}</th><td>passed</td>" in body
    assert (
        staff_client.post(
            reverse("admin:provenance_deletionrequest_change", args=[history.purge.pk]), {"outcome": "edited"}
        ).status_code
        == 403
    )
    assert staff_client.get(reverse("admin:provenance_deletionrequest_add")).status_code == 403
    delete = reverse("admin:provenance_deletionrequest_delete", args=[history.purge.pk])
    assert staff_client.get(delete).status_code == 403
    assert DeletionRequest.objects.get(pk=history.purge.pk).outcome == history.purge.outcome


def test_csv_export_content(staff_client, history, owner):
    response = export(staff_client, [history.purge.pk, history.pending.pk])
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="deletion-audit-')
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [row["id"] for row in rows] == [str(history.pending.pk), str(history.purge.pk)]
    purge = rows[1]
    assert {key: purge[key] for key in ("owner", "actor", "confirmed_by", "on_behalf", "selector", "mode")} == {
        "owner": f"alice (#{owner.pk})",
        "actor": f"alice (#{owner.pk})",
        "confirmed_by": f"alice (#{owner.pk})",
        "on_behalf": "no",
        "selector": "exact",
        "mode": "purge",
    }
    assert (purge["status"], purge["matched"], purge["dependents"], purge["deleted"], purge["verification"]) == (
        "executed",
        "2",
        "0",
        "2",
        "passed",
    )
    assert (rows[0]["status"], rows[0]["verification"], rows[0]["confirmed_by"]) == ("previewed", "—", "")


def test_messages_by_status_with_tombstones(staff_client, history):
    url = reverse("admin:chat_message_changelist")
    purged = staff_client.get(f"{url}?status__exact=purged")
    assert [m.pk for m in purged.context["cl"].result_list] == [history.secret.pk, history.reply.pk]
    assert purged.content.decode().count(TOMBSTONE) == 2
    deleted = staff_client.get(f"{url}?status__exact=deleted")
    assert [m.pk for m in deleted.context["cl"].result_list] == [history.lyon.pk]
    active = staff_client.get(f"{url}?status__exact=active")
    assert [m.pk for m in active.context["cl"].result_list] == [history.kept.pk]
    assert KEPT in active.content.decode()


def test_message_detail_is_read_only_and_purged_is_a_tombstone(staff_client, history):
    url = reverse("admin:chat_message_change", args=[history.secret.pk])
    body = staff_client.get(url).content.decode()
    assert TOMBSTONE in body
    assert "<textarea" not in body and 'name="content"' not in body and 'name="_save"' not in body
    assert staff_client.post(url, {"content": "back again"}).status_code == 403
    live = staff_client.get(reverse("admin:chat_message_change", args=[history.kept.pk])).content.decode()
    assert KEPT in live and "<textarea" not in live


def test_integrity_page_lists_users_and_no_violation(staff_client, history, owner, other_owner, thread):
    response = staff_client.get(reverse("admin:provenance_deletionrequest_integrity"))
    assert response.status_code == 200
    body = response.content.decode()
    assert "I1 holds for all 1 user with messages." in body
    [row] = response.context["rows"]
    assert (row["user"], row["live"], row["deleted"], row["purged"], row["violations"]) == (owner, 1, 1, 2, [])
    assert reverse("admin:provenance_deletionrequest_graph", args=[owner.pk]) in body


def test_graph_page_mounts_the_read_only_explorer(staff_client, history, owner):
    response = staff_client.get(reverse("admin:provenance_deletionrequest_graph", args=[owner.pk]))
    assert response.status_code == 200
    body = response.content.decode()
    assert "data-admin-graph" in body
    assert '<script type="importmap">{"imports":{"cytoscape":' in body
    assert 'src="/static/provenance/admin-graph.js"' in body
    assert reverse("admin:provenance_deletionrequest_graph_elements", args=[owner.pk]) in body


def test_graph_elements_have_the_shape_of_the_api_graph(staff_client, history, owner):
    url = reverse("admin:provenance_deletionrequest_graph_elements", args=[owner.pk])
    for query in ("", "?include_deleted=true", f"?thread={history.thread.pk}&include_deleted=true"):
        mine = client_for(owner).get(f"/api/graph/{query}").json()
        # The owner's graph, except that staff read no soft-deleted text: such a node's label is its number and role.
        for node in mine["nodes"]:
            if node["data"]["status"] == "deleted":
                node["data"]["label"] = f"#{node['data']['seq']} {node['data']['role']}"
        assert staff_client.get(url + query).json() == mine
    assert staff_client.get(url + "?thread=999999").status_code == 404
    assert staff_client.get(url + "?include_deleted=maybe").status_code == 400
    message = staff_client.get(
        reverse("admin:provenance_deletionrequest_graph_message", args=[owner.pk, history.secret.pk])
    ).json()
    assert (message["id"], message["status"], message["content"]) == (history.secret.pk, "purged", "")
    soft = staff_client.get(
        reverse("admin:provenance_deletionrequest_graph_message", args=[owner.pk, history.lyon.pk])
    ).json()
    assert (soft["status"], soft["content"]) == ("deleted", "")
    threads = staff_client.get(reverse("admin:provenance_deletionrequest_graph_threads", args=[owner.pk])).json()
    assert [thread["id"] for thread in threads] == [history.thread.pk]


def test_staff_read_no_title_of_a_thread_whose_messages_are_all_removed(staff_client, owner):
    imported = Thread.objects.create(
        owner=owner, title="Talks with my divorce lawyer", source="chatgpt", source_id="c1"
    )
    said = make_message(imported, "I am getting divorced", imported_from="chatgpt")
    left = make_thread(owner, "Weekend plans")
    make_message(left, "I like hiking")
    url = reverse("admin:provenance_deletionrequest_graph_threads", args=[owner.pk])
    before = {thread["id"]: thread["title"] for thread in staff_client.get(url).json()}

    preview = deletion_preview(owner=owner, actor=owner, mode="soft", ids=[said.pk])
    deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)

    after = {thread["id"]: thread["title"] for thread in staff_client.get(url).json()}
    mine = {thread["id"]: thread["title"] for thread in client_for(owner).get("/api/threads/").json()}
    assert before == {imported.pk: "Talks with my divorce lawyer", left.pk: "Weekend plans"}
    assert after == {imported.pk: "", left.pk: "Weekend plans"}
    # The owner still reads it: the undo would bring its messages back under it.
    assert mine[imported.pk] == "Talks with my divorce lawyer"


def test_graph_message_of_another_user_is_not_found(staff_client, history, other_owner):
    url = reverse("admin:provenance_deletionrequest_graph_message", args=[other_owner.pk, history.kept.pk])
    assert staff_client.get(url).status_code == 404


def test_every_admin_page_sends_a_normal_user_to_the_login(client, owner, history):
    client.force_login(owner)
    for url in every_admin_page(history):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("admin:login")), url
    assert export(client, [history.purge.pk]).status_code == 302


def test_anonymous_is_sent_to_the_login(client, history):
    for url in custom_pages(history):
        response = client.get(url)
        assert (response.status_code, response["Location"].split("?")[0]) == (302, reverse("admin:login")), url


def test_staff_without_permissions_is_denied(client, clerk, history):
    """The clerk may read the audit and the integrity page; messages, graphs and subject requests are refused."""
    client.force_login(clerk)
    assert client.get(reverse("admin:provenance_deletionrequest_changelist")).status_code == 200
    assert client.get(reverse("admin:provenance_deletionrequest_integrity")).status_code == 200
    assert client.get(reverse("admin:chat_message_changelist")).status_code == 403
    owner_id = history.secret.owner_id
    for url in custom_pages(history)[1:]:
        assert client.get(url).status_code == 403, url
    assert client.get(f"{reverse('admin:chat_message_changelist')}?status__exact=purged").status_code == 403
    assert client.get(reverse("admin:provenance_deletionrequest_graph", args=[owner_id])).status_code == 403
