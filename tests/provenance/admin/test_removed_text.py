"""Staff never read removed text in the admin: neither purged nor soft-deleted."""

import httpx
import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from chat.admin import DELETED_MARK, TOMBSTONE
from chat.models import Message
from provenance.deletions.preview import deletion_preview
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


# --- Probing removed text through the query string, over real HTTP ----------------------------------

# Every lookup Django accepts on the text column (exact, icontains, startswith, regex, search, trigram_similar...),
# and through its transforms (`content__unaccent__startswith`...).
CONTENT_LOOKUPS = sorted(Message._meta.get_field("content").get_lookups())


def _admin_http(live_server, staff):
    """An httpx client signed in to the admin of a server listening on a real socket."""
    browser = Client()
    browser.force_login(staff)
    session = browser.cookies[settings.SESSION_COOKIE_NAME].value
    return httpx.Client(base_url=live_server.url, cookies={settings.SESSION_COOKIE_NAME: session}, timeout=30)


@pytest.mark.django_db(transaction=True)
def test_no_lookup_on_a_message_s_text_answers_in_the_admin_list(live_server, staff, history):
    with _admin_http(live_server, staff) as http:
        url = "/admin/chat/message/"
        assert http.get(url, params={"status__exact": "deleted"}).status_code == 200  # the list's own filters work
        answers = {}
        for lookup in CONTENT_LOOKUPS:
            for guess in ("I live in L", "Paris"):
                probe = {"id__exact": history.lyon.pk, f"content__{lookup}": guess}
                answers[(lookup, guess)] = http.get(url, params=probe).status_code
            answers[(lookup, "transform")] = http.get(url, params={f"content__lower__{lookup}": "i live"}).status_code
        assert set(answers.values()) == {400}
        # Nor on any other column that holds text or a derivative, nor through the owner's relation.
        for probe in ("search__isnull", "embedding__isnull", "index_sources__contains", "thread__title__icontains"):
            assert http.get(url, params={probe: "x"}).status_code == 400, probe


@pytest.mark.django_db(transaction=True)
def test_the_deletion_audit_list_accepts_only_its_own_filters(live_server, staff, history):
    with _admin_http(live_server, staff) as http:
        url = "/admin/provenance/deletionrequest/"
        assert http.get(url, params={"status__exact": "executed", "verification": "passed"}).status_code == 200
        assert http.get(url, params={"receipt__icontains": "Lyon"}).status_code == 400
        assert http.get(url, params={"owner__messages__content__icontains": "Lyon"}).status_code == 400


def test_a_staff_selection_by_words_or_meaning_never_matches_a_removed_message(staff, history, owner):
    # The owner's own purge by words reaches the soft-deleted message (they want the text gone)...
    own = deletion_preview(owner=owner, actor=owner, mode="purge", exact="Lyon")
    assert own.matched_ids == [history.lyon.pk]
    # ...a staff member's does not, whatever the guess: right and wrong guesses answer alike.
    guesses = [deletion_preview(owner=owner, actor=staff, mode="purge", exact=guess) for guess in ("Lyon", "Paris")]
    assert [preview.matched_ids for preview in guesses] == [[], []]
    meaning = deletion_preview(owner=owner, actor=staff, mode="purge", semantic="I live in Lyon", threshold=-1.0)
    assert history.lyon.pk not in meaning.matched_ids
    # By id, staff still reach it (a data-subject request names the messages).
    assert deletion_preview(owner=owner, actor=staff, mode="purge", ids=[history.lyon.pk]).matched_ids == [
        history.lyon.pk
    ]
