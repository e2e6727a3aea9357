"""POST/GET /api/imports/: upload, job, list, events, isolation and limits."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from rest_framework.throttling import ScopedRateThrottle

from chat.models import ImportJob, ImportUpload, Message, Thread
from chat.subjects import FACTS_SOURCE
from tests.helpers import FIXTURES

CHATGPT = (FIXTURES / "chatgpt_conversations.json").read_bytes()


def upload(api, data: bytes, name: str = "conversations.json", **extra):
    return api.post("/api/imports/", {"file": SimpleUploadedFile(name, data), **extra}, format="multipart")


def test_upload_runs_the_job_and_deletes_the_file(api, owner, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = upload(api, CHATGPT)
    assert response.status_code == 202
    body = response.json()
    # The request only sniffs the file: its totals are the job's, counted when it runs.
    assert (body["status"], body["format"], body["filename"], body["messages_total"]) == (
        "pending",
        "chatgpt",
        "conversations.json",
        0,
    )
    job = api.get(f"/api/imports/{body['id']}/").json()
    # The conversations it made; the facts drawn from them sit in the owner's memory thread, not the job's.
    threads = sorted(Thread.objects.filter(owner=owner).exclude(source=FACTS_SOURCE).values_list("pk", flat=True))
    assert {
        k: job[k] for k in ("status", "messages_total", "messages_imported", "edges_created", "errors", "error")
    } == {
        "status": "done",
        "messages_total": 8,
        "messages_imported": 8,
        "edges_created": 6,
        "errors": [],
        "error": None,
    }
    assert sorted(job["threads"]) == threads
    assert ImportUpload.objects.count() == 0
    # The events of a job: tests/chat/imports/test_import_worker.py (an async view, served by uvicorn there).


def test_malformed_conversation_is_reported_the_rest_lands(api, owner, django_capture_on_commit_callbacks):
    document = json.loads(CHATGPT)
    document[1]["mapping"]["aaa1-a1"]["message"]["create_time"] = "yesterday"
    with django_capture_on_commit_callbacks(execute=True):
        job_id = upload(api, json.dumps(document).encode()).json()["id"]
    job = api.get(f"/api/imports/{job_id}/").json()
    assert (job["status"], job["messages_imported"], job["conversations_failed"]) == ("done", 6, 1)
    assert job["errors"] == [
        {
            "conversation": "664b7c9d-1e2f-8005-b3c4-python",
            "field": "mapping.aaa1-a1.message.create_time",
            "message": "is not a number of seconds since the epoch",
        }
    ]


@pytest.mark.parametrize(
    ("data", "extra", "fields"),
    [
        (
            b'{"hello": 1}',
            {},
            {"file": "Unsupported file: not a ChatGPT or Claude conversations.json, a DeLLM export or JSONL."},
        ),
        (CHATGPT, {"format": "gemini"}, {"format": '"gemini" is not a valid choice.'}),
        (b"[]", {}, {"conversations": "The file holds no conversations."}),
    ],
)
def test_unsupported_file_is_400_and_stores_nothing(api, data, extra, fields):
    response = upload(api, data, **extra)
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == fields
    assert (ImportJob.objects.count(), Message.objects.count()) == (0, 0)


def test_too_large_is_413_json(api, settings):
    settings.DELLM_IMPORT_MAX_BYTES = 1000
    response = upload(api, CHATGPT)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    assert ImportJob.objects.count() == 0


def test_no_file_is_400(api):
    response = api.post("/api/imports/", {}, format="multipart")
    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["file"]


def test_another_users_import_is_404_and_lists_are_per_user(api, other_api, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        job_id = upload(api, CHATGPT).json()["id"]
    response = other_api.get(f"/api/imports/{job_id}/")
    assert (response.status_code, response.json()["error"]["code"]) == (404, "not_found")
    assert other_api.get("/api/imports/").json()["count"] == 0
    listed = api.get("/api/imports/?page_size=1").json()
    assert (listed["count"], [job["id"] for job in listed["results"]]) == (1, [job_id])


def test_uploads_are_rate_limited_reads_are_not(api, monkeypatch):
    monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES", {"import": "2/hour"})
    statuses = [upload(api, b"[]").status_code for _ in range(3)]
    assert statuses == [400, 400, 429]
    assert [api.get("/api/imports/").status_code for _ in range(3)] == [200, 200, 200]


def test_list_query_count_does_not_grow(api, owner, django_assert_num_queries):
    def make_jobs(n):
        for _ in range(n):
            ImportJob.objects.create(owner=owner, format="chatgpt")

    make_jobs(1)
    with django_assert_num_queries(3) as one:
        api.get("/api/imports/")
    make_jobs(2)
    with django_assert_num_queries(len(one.captured_queries)):
        api.get("/api/imports/")


def test_command_imports_with_progress_and_is_idempotent(owner, tmp_path, capsys):
    path = tmp_path / "conversations.json"
    path.write_bytes(CHATGPT)
    call_command("dellm_import", str(path), user="alice")
    out, err = capsys.readouterr()
    assert out == (
        "chatgpt: 2 conversations, 8 messages imported, 0 skipped, 6 provenance edges; 0 conversations not imported.\n"
    )
    assert "8/8" in err
    call_command("dellm_import", str(path), user="alice", format="chatgpt", no_progress=True)
    assert capsys.readouterr().out.startswith("chatgpt: 2 conversations, 0 messages imported")
    assert Message.objects.filter(owner=owner).count() == 8
    with pytest.raises(CommandError, match="No user named 'nobody'"):
        call_command("dellm_import", str(path), user="nobody")
    path.write_bytes(b"{}")
    with pytest.raises(CommandError, match="Unsupported file"):
        call_command("dellm_import", str(path), user="alice")


def test_stuck_jobs_are_failed_and_their_uploads_deleted(owner):
    from datetime import timedelta

    from django.utils import timezone

    from chat.imports.jobs import import_jobs_sweep

    old = ImportJob.objects.create(owner=owner, format="chatgpt", status="running")
    ImportJob.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(hours=2))
    ImportUpload.objects.create(job=old, data=CHATGPT)
    fresh = ImportJob.objects.create(owner=owner, format="chatgpt")
    ImportUpload.objects.create(job=fresh, data=CHATGPT)

    assert import_jobs_sweep(older_than_s=3600) == 1

    old.refresh_from_db()
    assert (old.status, old.error) == (
        "failed",
        "The import did not finish in time; upload the file again (nothing is imported twice).",
    )
    assert list(ImportUpload.objects.values_list("job_id", flat=True)) == [fresh.pk]
