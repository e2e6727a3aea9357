import json

import pytest

from chat.imports.stream import import_publish
from chat.models import ImportJob, ImportUpload, Message
from chat.turns.start import turn_create
from core.streams.pubsub import redis_client
from core.streams.slots import slots_key
from lab.bench.imports import chatgpt_export
from tests.chat.turns.test_turn_stream import client_for, read_events
from tests.helpers import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_upload_is_imported_by_the_worker_with_progress_events(start_worker, asgi_server, owner):
    worker = start_worker()
    client = client_for(asgi_server({"DELLM_CELERY_QUEUE": worker.queue}), owner)
    data = chatgpt_export(conversations=40, per_conversation=20)
    posted = client.post("/api/imports/", files={"file": ("conversations.json", data)})
    assert posted.status_code == 202
    job_id = posted.json()["id"]
    with client.stream("GET", f"/api/imports/{job_id}/events/", timeout=120) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = read_events(response)

    names = [name for name, _ in events]
    assert names[-1] == "done" and set(names[:-1]) == {"progress"}
    done = [data["import"]["messages_done"] for _, data in events]
    assert done == sorted(done) and done[-1] == 800
    final = events[-1][1]["import"]
    assert {k: final[k] for k in ("status", "messages_imported", "edges_created", "conversations_failed")} == {
        "status": "done",
        "messages_imported": 800,
        # Linear edges (chat/lineage.py): a reply derives from the previous reply and the message since,
        # so 1 + 2 x 9 per conversation of 10 exchanges.
        "edges_created": 40 * 19,
        "conversations_failed": 0,
    }
    assert len(final["threads"]) == 40
    assert Message.objects.filter(owner=owner, imported_from="chatgpt").count() == 800
    # The file lived in the database only while the job ran.
    assert ImportUpload.objects.count() == 0
    assert json.loads(client.get(f"/api/imports/{job_id}/").content)["status"] == "done"


def test_import_stream_waits_on_its_channel_and_shares_the_per_user_stream_cap(asgi_server, owner, other_owner, thread):
    """Served like the turn stream: the outcome arrives by pub/sub (the recheck is as long as the timeout)."""
    server = asgi_server({"DELLM_MAX_STREAMS_PER_USER": "1", "DELLM_SSE_RECHECK": "30"})
    job = ImportJob.objects.create(owner=owner, format="chatgpt", status=ImportJob.Status.RUNNING, messages_total=5)
    turn = turn_create(thread=thread, content="waiting", enqueue=False)
    client = client_for(server, owner)
    path = f"/api/imports/{job.pk}/events/"
    assert client_for(server, other_owner).get(path).json()["error"]["code"] == "not_found"
    with client.stream("GET", path) as response:
        lines = response.iter_lines()
        first = read_events(response, limit=1, lines=lines)
        refused = [client.get(path), client.get(f"/api/turns/{turn.pk}/events/")]
        ImportJob.objects.filter(pk=job.pk).update(status=ImportJob.Status.DONE, messages_done=5)
        import_publish(job.pk)
        rest = read_events(None, lines=lines)

    assert [(name, data["import"]["status"]) for name, data in first] == [("progress", "running")]
    assert [(r.status_code, r.json()["error"]["code"], r.headers["Retry-After"]) for r in refused] == [
        (429, "throttled", "5")
    ] * 2
    assert [(name, data["import"]["messages_done"]) for name, data in rest] == [("done", 5)]
    # The closed stream gave its slot back (the server does when the stream ends, a moment after its last event).
    assert wait_for(lambda: redis_client().zcard(slots_key(owner.pk)) == 0)
    with client.stream("GET", path) as again:
        assert [name for name, _ in read_events(again)] == ["done"]
