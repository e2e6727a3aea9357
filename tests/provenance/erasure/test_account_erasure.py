"""Erasing a whole account: through the one eraser, by the user or by staff, leaving a receipt and no text."""

import httpx
import pytest
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.urls import reverse
from knox.models import AuthToken
from rest_framework.test import APIClient

from assistant.mcp.server import token_user
from assistant.mcp.tokens import agent_token_create
from chat.agent_memory import note_store
from chat.index.vectors import owner_vector_index_sync, vector_indexes
from chat.models import ContextEdge, ImportJob, ImportUpload, Message, Thread, Turn
from chat.turns.start import turn_create
from core.auth.tokens import token_create
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview
from provenance.erasure.eraser import scrub, snapshot_horizon, unerased_owners
from provenance.erasure.registry import TABLES
from provenance.models import AccountErasure, DeletionRequest
from tests.factories import make_edge, make_message, make_thread, make_user, unit_vector
from tests.helpers import heap_tuples, relation_files
from tests.provenance.erasure.test_erasure import _indexes_now

# Words no other test writes: a rolled-back test's rows stay in the files until a flush, and would match.
WORDS = (b"xylophonist", b"quagmirely", b"640517")
SECRET = "xylophonist quagmirely hides my locker code 640517"


def _residue(relations: list[str]) -> dict[str, list[bytes]]:
    """{relation: these words in it}: an index's whole file, a table's (and its TOAST's) tuples, live or dead."""
    found = {}
    for name, data in relation_files(relations).items():
        text = heap_tuples(data) if name.removesuffix(":toast") in TABLES else data
        if words := [word for word in WORDS if word in text]:
            found[name] = words
    return found


pytestmark = pytest.mark.django_db(transaction=True)


def _account_with_everything(owner):
    """Messages (one long, out of line), a reply with its edge, a turn, a soft deletion, an import with its upload,
    an imported title, an agent's note, API and agent tokens, a per-owner vector index."""
    thread = make_thread(owner, f"about {SECRET}")
    fact = make_message(thread, SECRET, embedding=unit_vector(1))
    reply = make_message(thread, f"Noted: {SECRET}", role="assistant", embedding=unit_vector(2))
    make_edge(fact, reply, rank=0, score=1.0)
    turn_create(thread=thread, content=f"Where is my locker? {SECRET}", enqueue=False)
    for seed in range(3, 8):
        make_message(thread, f"walrus number {seed} {SECRET}", embedding=unit_vector(seed))
    soft = deletion_preview(owner=owner, actor=owner, mode="soft", ids=[reply.pk])
    deletion_confirm(deletion_id=soft.pk, owner_id=owner.pk, confirmed_by=owner)
    imported = Thread.objects.create(owner=owner, title=SECRET, source="jsonl", source_id=f"key {SECRET}")
    job = ImportJob.objects.create(owner=owner, format="jsonl", filename=f"{SECRET}.jsonl", threads=[imported.pk])
    ImportUpload.objects.create(job=job, data=SECRET.encode())
    note_store(owner_id=owner.pk, text=f"The user said: {SECRET}", derived_from=[fact.pk])
    owner_vector_index_sync(min_messages=3)
    assert [index.owner_id for index in vector_indexes()] == [owner.pk]
    return agent_token_create(owner=owner, name="Claude Desktop")[1]


def test_the_user_erases_their_account_and_no_text_stays_anywhere_registered(live_server, owner, other_owner):
    agent = _account_with_everything(owner)
    # The check can see the words where they live: the heap, TOAST-less rows and both full-text indexes.
    assert set(_residue(["chat_message", "chat_thread", "message_search_gin", "message_owner_search_gin"])) == {
        "chat_message",
        "chat_thread",
        "message_search_gin",
        "message_owner_search_gin",
    }
    kept = make_message(make_thread(other_owner), "walrus of another user")
    person = token_create(user=owner)[1]
    api = httpx.Client(base_url=live_server.url, headers={"Authorization": f"Token {person}"}, timeout=60)
    summary = api.get("/api/account/").json()
    assert summary == {
        "username": owner.username,
        "threads": 3,  # the chat, the imported one and the agent's notes
        "messages": 9,
        "deletions": 1,
        "imports": 1,
        "tokens": 2,  # the API token this client signs in with, and the agent's
    }
    # A wrong confirmation changes nothing.
    refused = api.post("/api/account/erase/", json={"username": "someone else"})
    assert (refused.status_code, refused.json()["error"]["fields"]) == (400, {"username": "mismatch"})
    assert get_user_model().objects.filter(pk=owner.pk).exists()
    erased = api.post("/api/account/erase/", json={"username": owner.username})
    assert erased.status_code == 200, erased.content
    receipt = erased.json()
    assert (receipt["owner_id"], receipt["counts"]["chat_message"]) == (owner.pk, 9)
    assert not any(word.decode() in str(receipt) for word in WORDS)
    # The account and every token are gone: the API and /mcp refuse them.
    assert not get_user_model().objects.filter(pk=owner.pk).exists()
    assert api.get("/api/threads/").status_code == 401
    assert token_user(f"Bearer {agent}".encode()) is None
    assert AuthToken.objects.filter(user_id=owner.pk).count() == 0
    for model in (Message, ContextEdge, Turn, Thread, ImportJob, DeletionRequest):
        assert model.objects.filter(owner_id=owner.pk).count() == 0, model
    assert Message.objects.filter(pk=kept.pk).exists()
    assert vector_indexes() == []
    # Physically: its vacuum ran at commit (eager here) and nothing older held it back; then the scrub.
    erasure = AccountErasure.objects.get(pk=receipt["id"])
    assert (erasure.actor_id, erasure.erased_at is not None) == (None, True)
    assert unerased_owners(horizon=snapshot_horizon()) == []
    scrub()
    erasure.refresh_from_db()
    assert erasure.scrubbed_at is not None
    assert _residue(sorted(_indexes_now()) + list(TABLES)) == {}


def test_staff_deleting_a_user_in_the_admin_erases_the_account_through_the_eraser(client, staff, owner):
    _account_with_everything(owner)
    username = owner.get_username()
    # Sign-ins of the account (a failure and a success, as django-axes records them) and of another one.
    seen = {"ip_address": "203.0.113.7", "user_agent": "Firefox/140", "get_data": "", "post_data": ""}
    AccessAttempt.objects.create(username=username, failures_since_start=1, **seen)
    AccessFailureLog.objects.create(username=username, ip_address="203.0.113.7", user_agent="Firefox/140")
    AccessLog.objects.create(username=username, ip_address="203.0.113.7", user_agent="Firefox/140")
    AccessAttempt.objects.create(username="someone-else", failures_since_start=2, **seen)
    client.force_login(staff)
    url = reverse("admin:auth_user_delete", args=[owner.pk])
    assert client.get(url).status_code == 200  # Django's confirmation page
    assert client.post(url, {"post": "yes"}).status_code == 302
    erasure = AccountErasure.objects.get(owner_id=owner.pk)
    assert (erasure.actor_id, erasure.counts["chat_message"]) == (staff.pk, 9)
    assert (erasure.counts["sign_in_records"], erasure.counts["admin_log_entries"]) == (3, 1)
    for model in (AccessAttempt, AccessFailureLog, AccessLog):
        assert not model.objects.filter(username=username).exists()
    assert AccessAttempt.objects.filter(username="someone-else").exists()
    # The admin log says which account staff erased, by id only.
    [entry] = LogEntry.objects.filter(object_id=str(owner.pk), content_type__model="user")
    assert (entry.user_id, entry.object_repr, entry.change_message) == (staff.pk, f"erased account #{owner.pk}", "")
    assert not LogEntry.objects.filter(object_repr__contains=username).exists()
    assert Message.objects.filter(owner_id=owner.pk).count() == 0
    assert vector_indexes() == []
    # The bulk action goes the same way.
    other = make_user("bulk")
    make_message(make_thread(other), SECRET)
    changelist = reverse("admin:auth_user_changelist")
    client.post(changelist, {"action": "delete_selected", "_selected_action": [other.pk], "post": "yes"})
    assert AccountErasure.objects.filter(owner_id=other.pk, actor_id=staff.pk).exists()


def test_an_agent_token_cannot_erase_the_account(owner):
    agent = agent_token_create(owner=owner, name="agent")[1]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {agent}")
    response = api.post("/api/account/erase/", {"username": owner.username}, format="json")
    assert (response.status_code, response.json()["error"]["code"]) == (403, "agent_token")
    assert get_user_model().objects.filter(pk=owner.pk).exists()
