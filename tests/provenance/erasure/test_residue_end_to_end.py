"""I3 end to end: a secret used in several contexts is purged; then no copy is reachable anywhere."""

import logging

import pytest
from django.urls import reverse

from chat.models import ContextEdge, Message, Turn
from chat.subjects import FACTS_SOURCE
from core.logs import WITHHELD
from tests.factories import make_user
from tests.helpers import client_for, pg_dump, redis_dump, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

SECRET_WORD = "Zanzibar-4471"
SECRET = f"my tortoise is called {SECRET_WORD}"
KEPT = "I like jasmine tea"


def everything_logged(caplog) -> str:
    """What every handler was given in this process: formatted lines, tracebacks and each record's attributes."""
    return caplog.text + "\n".join(repr(vars(record)) for record in caplog.records)


def test_purged_secret_is_nowhere_the_application_can_reach(start_worker, owner, thread, caplog, settings, client):
    # DEBUG=True and the root logger at DEBUG: the most talkative configuration.
    settings.DEBUG = True
    caplog.set_level(logging.DEBUG)
    worker = start_worker()
    api = client_for(owner)

    for text in [SECRET, "What is my tortoise called?", KEPT, "Remind me what my tortoise is called"]:
        accepted = api.post(f"/api/threads/{thread.pk}/messages/", {"content": text}, format="json")
        assert accepted.status_code == 202
        turn_id = accepted.json()["turn"]["id"]
        wait_for(lambda turn_id=turn_id: Turn.objects.filter(pk=turn_id, status="done").exists())
    # A deletion request typed in the chat is previewed, never stored; this one is cancelled.
    typed = api.post(f"/api/threads/{thread.pk}/messages/", {"content": f'delete "{SECRET_WORD}"'}, format="json")
    assert api.post(f"/api/deletions/{typed.json()['deletion']['id']}/cancel/").status_code == 200

    secret = Message.objects.get(content=SECRET)
    # Its reply's context and later ones: the fact drawn from it stands in for it in the later contexts.
    fact = Message.objects.get(in_edges__source=secret, thread__source=FACTS_SOURCE)
    assert ContextEdge.objects.filter(source__in=[secret, fact]).count() >= 4
    assert pg_dump().count(SECRET_WORD) >= 3  # replies quote it: the dump can see it

    preview = api.post("/api/deletions/", {"select": {"exact": SECRET_WORD}, "mode": "purge"}, format="json").json()
    done = api.post(f"/api/deletions/{preview['id']}/confirm/").json()
    # Verified after the answer (docs/API.md, "Confirm, verified after it returns").
    wait_for(lambda: not api.get(f"/api/deletions/{preview['id']}/").json()["verifying"])
    done = api.get(f"/api/deletions/{preview['id']}/").json()
    assert (done["status"], done["receipt"]["passed"]) == ("executed", True)
    assert secret.pk in done["deleted"] and len(done["deleted"]) >= 3
    wait_for(lambda: "vacuumed chat_message" in worker.log.read_text())

    staff = make_user("root", is_staff=True, is_superuser=True)
    client.force_login(staff)
    for url in [
        reverse("admin:provenance_deletionrequest_changelist"),
        reverse("admin:provenance_deletionrequest_change", args=[done["id"]]),
        reverse("admin:chat_message_changelist") + "?status__exact=purged",
    ]:
        assert client.get(url).status_code == 200

    dump = pg_dump()
    assert SECRET_WORD not in dump
    assert KEPT in dump
    assert SECRET_WORD not in redis_dump()
    logged, worker_log = everything_logged(caplog), worker.log.read_text()
    assert f"deletion {done['id']} verified" in logged  # the capture saw the application log
    assert "Task chat.turn_run[" in worker_log and "vacuumed chat_message" in worker_log
    for text in (logged, worker_log):
        assert SECRET_WORD not in text
        # Clean by construction: the filter never had to withhold anything.
        assert WITHHELD not in text
