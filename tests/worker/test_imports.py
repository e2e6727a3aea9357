import json

import httpx
import pytest

from chat.models import ImportUpload, Message
from dellm_site.auth import token_create
from lab.bench.imports import chatgpt_export
from tests.worker.test_sse import read_events

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_upload_is_imported_by_the_worker_with_progress_events(start_worker, live_server, owner):
    start_worker()
    client = httpx.Client(base_url=live_server.url, headers={"Authorization": f"Token {token_create(user=owner)[1]}"})
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
        "edges_created": 40 * 100,
        "conversations_failed": 0,
    }
    assert len(final["threads"]) == 40
    assert Message.objects.filter(owner=owner, imported_from="chatgpt").count() == 800
    # The file lived in the database only while the job ran.
    assert ImportUpload.objects.count() == 0
    assert json.loads(client.get(f"/api/imports/{job_id}/").content)["status"] == "done"
