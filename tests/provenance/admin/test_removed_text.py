"""Staff never read removed text in the admin: neither purged nor soft-deleted."""

from django.urls import reverse

from chat.admin import DELETED_MARK, TOMBSTONE
from tests.factories import KEPT, SECRET_WORD
from tests.helpers import client_for
from tests.provenance.admin.test_admin_pages import every_admin_page

LYON = "I live in Lyon"  # the history's soft-deleted message


def test_no_admin_page_displays_soft_deleted_or_purged_text(staff_client, history, owner):
    elements = reverse("admin:provenance_deletionrequest_graph_elements", args=[owner.pk])
    pages = [
        *every_admin_page(history),
        reverse("admin:provenance_deletionrequest_graph_message", args=[owner.pk, history.lyon.pk]),
        f"{elements}?thread={history.thread.pk}&include_deleted=true",
    ]
    shown = {url: staff_client.get(url) for url in pages}
    assert [url for url, response in shown.items() if response.status_code != 200] == []
    bodies = {url: response.content.decode() for url, response in shown.items()}
    assert KEPT in bodies[reverse("admin:chat_message_changelist")]  # live text is shown: the check can see text
    assert [url for url, body in bodies.items() if "Lyon" in body or SECRET_WORD in body] == []


def test_the_message_list_filtered_by_status_shows_tombstones_for_removed_messages(staff_client, history):
    url = reverse("admin:chat_message_changelist")
    deleted = staff_client.get(f"{url}?status__exact=deleted").content.decode()
    assert (deleted.count(DELETED_MARK), "Lyon" in deleted) == (1, False)
    detail = staff_client.get(reverse("admin:chat_message_change", args=[history.lyon.pk])).content.decode()
    assert (DELETED_MARK in detail, "Lyon" in detail) == (True, False)
    purged = staff_client.get(f"{url}?status__exact=purged").content.decode()
    assert purged.count(TOMBSTONE) == 2


def test_the_owner_still_sees_their_soft_deleted_message_in_the_graph(history, owner):
    # Withheld from staff only: the owner can undo a soft deletion, so their graph keeps its text.
    graph = client_for(owner).get("/api/graph/?include_deleted=true").json()
    labels = [node["data"]["label"] for node in graph["nodes"] if node["data"]["id"] == history.lyon.pk]
    assert labels == [f"#{history.lyon.seq} user: {LYON}"]
