"""An imported conversation leaves no text behind once purged: titles, keys, file names, uploads."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection

from chat.imports.jobs import import_job_create, import_job_run
from chat.imports.scrub import IMPORTED_TITLE, PURGED_UPLOAD_ERROR
from chat.models import ImportJob, ImportUpload, Message, Thread
from chat.source_keys import is_digest
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview
from provenance.erasure.eraser import scrub
from tests.factories import make_message
from tests.helpers import client_for, heap_tuples, pg_dump, relation_files

TITLE = "Divorce lawyer questions"
KEY = "divorce-lawyer-questions"
FILENAME = "divorce-lawyer-chats.jsonl"
LINES = [
    {"conversation": KEY, "id": "q-cayman", "role": "user", "title": TITLE,
     "content": "Should I tell my lawyer about the Cayman account?"},
    {"conversation": KEY, "id": "a-cayman", "role": "assistant",
     "content": "Yes: tell your lawyer about the Cayman account before the hearing."},
]  # fmt: skip
FILE = "\n".join(json.dumps(line) for line in LINES).encode()
TEXTS = (TITLE, KEY, FILENAME, "Cayman", "q-cayman", "a-cayman", "divorce")


def _upload(api) -> dict:
    response = api.post("/api/imports/", {"file": SimpleUploadedFile(FILENAME, FILE)}, format="multipart")
    assert response.status_code == 202
    return api.get(f"/api/imports/{response.json()['id']}/").json()


TABLES = ["chat_message", "chat_thread", "chat_importjob", "chat_importupload"]


def _residue(*, free_space: bool = False) -> dict[str, list[str]]:
    """{relation: texts in it}: each table's tuples (and its TOAST's), every index of them whole.

    `free_space`: the tables' whole files too, the bytes between tuples included.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
            "JOIN pg_class t ON t.oid = x.indrelid WHERE t.relname = ANY(%s)",
            [TABLES],
        )
        indexes = [row[0] for row in cursor.fetchall()]
    found = {}
    for name, data in relation_files(TABLES + indexes).items():
        table = name.removesuffix(":toast") in TABLES
        if texts := _texts_in(heap_tuples(data) if table and not free_space else data):
            found[name] = texts
    return found


def _texts_in(blob: str | bytes) -> list[str]:
    data = blob.lower() if isinstance(blob, str) else blob.decode("utf-8", "ignore").lower()
    return [text for text in TEXTS if text.lower() in data]


@pytest.mark.django_db(transaction=True)
def test_purge_of_an_imported_conversation_leaves_no_text(owner):
    with connection.cursor() as cursor:
        # Earlier tests' rolled-back rows hold these texts as dead tuples and index keys, maybe in another
        # owner's partition, which this purge's upkeep (the owner's partition only) rightly leaves: clear them.
        cursor.execute("VACUUM " + ", ".join(TABLES))
        for table in TABLES:
            cursor.execute(f"REINDEX TABLE {table}")
    api = client_for(owner)
    job = _upload(api)  # eager: the job runs at commit
    assert (job["status"], job["messages_imported"], job["filename"]) == ("done", 2, FILENAME)
    assert [t["title"] for t in api.get("/api/threads/").json()] == [TITLE]
    # The test can see every text: in the tables' tuples, and the keys in the unique indexes.
    seen = _residue()
    assert sorted({text for texts in seen.values() for text in texts}) == sorted(TEXTS)
    assert {"chat_thread", "chat_message", "chat_importjob", "thread_owner_source_unique"} <= set(seen)

    preview = deletion_preview(owner=owner, actor=owner, exact="Cayman", mode="purge")
    assert len(preview.matched_ids) == 2  # both messages of the conversation
    deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)

    assert [t["title"] for t in api.get("/api/threads/").json()] == [IMPORTED_TITLE]
    thread = Thread.objects.get(owner=owner)
    keys = [thread.source_id, *Message.objects.filter(owner=owner).values_list("source_id", flat=True)]
    assert len(keys) == 3 and all(is_digest(key) for key in keys)
    assert api.get(f"/api/imports/{job['id']}/").json()["filename"] == ""
    assert ImportUpload.objects.count() == 0
    assert _texts_in(pg_dump()) == []
    assert scrub() != []  # beat's scrub: the old keys leave the unique indexes
    assert _residue() == {}
    with connection.cursor() as cursor:
        # What VACUUM left is page free space; VACUUM FULL (docs/SECURITY.md) rewrites the tables.
        cursor.execute(f"VACUUM FULL {', '.join(TABLES)}")
    assert _residue(free_space=True) == {}

    again = _upload(api)  # the same file: its messages are found by their digests, still purged
    assert (again["status"], again["messages_imported"], again["threads"]) == ("done", 0, [])
    assert Thread.objects.filter(owner=owner).count() == 1
    live = Message.objects.filter(owner=owner, status__in=Message.LIVE)
    assert list(live) == []
    assert [t["title"] for t in api.get("/api/threads/").json()] == [IMPORTED_TITLE]
    assert ImportUpload.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_file_grown_since_the_purge_imports_only_its_new_messages(owner):
    api = client_for(owner)
    _upload(api)
    preview = deletion_preview(owner=owner, actor=owner, exact="hearing", mode="purge")
    deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)
    grown = (
        FILE
        + b"\n"
        + json.dumps({"conversation": KEY, "id": "q-2", "role": "user", "content": "And the house?"}).encode()
    )
    response = api.post("/api/imports/", {"file": SimpleUploadedFile("grown.jsonl", grown)}, format="multipart")
    job = api.get(f"/api/imports/{response.json()['id']}/").json()
    # The purged reply stays purged (found by its digest); the new user message lands in the same thread.
    assert (job["status"], job["messages_imported"]) == ("done", 1)
    thread = Thread.objects.get(owner=owner)
    assert list(Message.objects.filter(thread=thread).order_by("seq").values_list("status", "content")) == [
        ("active", LINES[0]["content"]),
        ("purged", ""),
        ("active", "And the house?"),
    ]


def test_purge_deletes_a_waiting_upload_and_its_job_says_upload_again(
    owner, thread, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):  # the job is not run yet
        job = import_job_create(owner=owner, data=FILE, filename=FILENAME)
    make_message(thread, "my locker code is 918273")
    with django_capture_on_commit_callbacks(execute=False):  # no VACUUM inside the test's transaction
        preview = deletion_preview(owner=owner, actor=owner, exact="918273", mode="purge")
        deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)
    assert ImportUpload.objects.count() == 0
    assert import_job_run(job_id=job.pk).status == ImportJob.Status.FAILED
    job.refresh_from_db()
    assert (job.status, job.error) == ("failed", PURGED_UPLOAD_ERROR)
    assert Message.objects.filter(owner=owner).count() == 1


@pytest.mark.django_db(transaction=True)
def test_an_earlier_job_that_failed_the_conversation_keeps_no_key_of_it_after_the_purge(owner):
    api = client_for(owner)
    # An earlier upload failed this conversation: its job never listed the thread, only the key, in its errors.
    failed = ImportJob.objects.create(
        owner=owner,
        format="jsonl",
        status=ImportJob.Status.DONE,
        errors=[
            {"conversation": KEY, "field": "messages.q-cayman.content", "message": "is empty"},
            {"conversation": "other-talk", "field": "id", "message": "appears twice in the file"},
        ],
    )
    _upload(api)

    preview = deletion_preview(owner=owner, actor=owner, exact="Cayman", mode="purge")
    deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)

    errors = api.get(f"/api/imports/{failed.pk}/").json()["errors"]
    assert [(is_digest(e["conversation"]), e["field"], e["message"]) for e in errors] == [
        (True, "messages", "is empty"),
        (False, "id", "appears twice in the file"),
    ]
    assert errors[1]["conversation"] == "other-talk"
    assert _texts_in(pg_dump()) == []


def test_reimporting_your_own_export_taken_before_a_purge_brings_nothing_back(
    owner, thread, django_capture_on_commit_callbacks
):
    api = client_for(owner)
    secret = make_message(thread, "Should I tell my lawyer about the Cayman account?")
    export = b"".join(api.get("/api/export/").streaming_content)
    with django_capture_on_commit_callbacks(execute=False):  # no VACUUM inside the test's transaction
        preview = deletion_preview(owner=owner, actor=owner, exact="Cayman", mode="purge")
        deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            "/api/imports/", {"file": SimpleUploadedFile("dellm-export.json", export)}, format="multipart"
        )
    job = api.get(f"/api/imports/{response.json()['id']}/").json()
    # The export names the purged tombstone by its id: it is found, and stays purged.
    assert (job["status"], job["messages_imported"], job["messages_skipped"], job["threads"]) == ("done", 0, 0, [])
    assert list(Message.objects.filter(owner=owner).values_list("pk", "status", "content")) == [
        (secret.pk, "purged", "")
    ]
    assert Thread.objects.filter(owner=owner).count() == 1
