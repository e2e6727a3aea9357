"""Per-account quotas on stored messages (chat/quotas.py): at an upload, in the import worker, at /v1's transcript."""

import json
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from chat.imports.formats import parse_file
from chat.imports.history import history_import
from chat.models import ImportJob, Message, Thread
from chat.quotas import ImportAllowance, QuotaExceeded
from chat.writer import message_store
from tests.factories import make_message, make_thread


def jsonl(*conversations: int) -> bytes:
    """One conversation per count: that many messages, user and assistant in turn."""
    lines = [
        {"conversation": f"c{index}", "role": "user" if m % 2 == 0 else "assistant", "content": f"c{index} m{m}"}
        for index, count in enumerate(conversations)
        for m in range(count)
    ]
    return "\n".join(json.dumps(line) for line in lines).encode()


def upload(api, data: bytes):
    return api.post("/api/imports/", {"file": SimpleUploadedFile("chat.jsonl", data)}, format="multipart")


def history(owner, count: int, age: timedelta = timedelta(0)) -> None:
    thread = make_thread(owner)
    for _ in range(count):
        make_message(thread)
    Message.objects.filter(owner=owner).update(created_at=timezone.now() - age)


def test_an_upload_when_the_days_quota_is_spent_is_429_with_retry_after(api, owner, settings):
    settings.DELLM_QUOTA_MESSAGES_PER_DAY = 5
    # Five messages an hour ago: the first of them ages out of the day in 23 hours.
    history(owner, 5, age=timedelta(hours=1))
    response = upload(api, jsonl(2))
    assert response.status_code == 429
    assert response.headers["Retry-After"] == str(23 * 3600)
    assert response.json()["error"] == {
        "code": "quota_exceeded",
        "message": "Importing would pass this account's quota of 5 messages stored in 24 hours; try again in 82800 s.",
        "fields": {"messages": "over quota"},
    }
    assert not ImportJob.objects.exists()


def test_yesterdays_messages_leave_todays_quota_free(api, owner, settings, django_capture_on_commit_callbacks):
    settings.DELLM_QUOTA_MESSAGES_PER_DAY = 5
    history(owner, 5, age=timedelta(hours=25))
    with django_capture_on_commit_callbacks(execute=True):
        response = upload(api, jsonl(2, 2))
    assert response.status_code == 202
    assert ImportJob.objects.get().messages_imported == 4


def test_an_upload_into_a_full_account_is_413(api, owner, settings):
    settings.DELLM_QUOTA_MESSAGES = 3
    history(owner, 3, age=timedelta(days=30))
    response = upload(api, jsonl(2))
    assert response.status_code == 413
    assert response.json()["error"]["message"] == (
        "Importing would pass this account's quota of 3 messages in all (it holds 3, purged ones included)."
    )


def test_an_import_lands_whole_conversations_until_the_quota_then_reports_each_left_out(owner, settings):
    settings.DELLM_QUOTA_MESSAGES_PER_DAY = 7
    history(owner, 1)
    # 1 stored + 2 + 3 fit in 7; the next 2 would make 8, and the one after is refused too, though it would fit.
    progress = history_import(owner_id=owner.pk, parsed=parse_file(jsonl(2, 3, 2, 1)))
    assert (progress.messages_imported, progress.conversations_failed) == (5, 2)
    assert sorted(Thread.objects.filter(owner=owner, source="jsonl").values_list("source_id", flat=True)) == [
        "c0",
        "c1",
    ]
    refused = (
        "Importing this conversation would pass this account's quota of 7 messages stored in 24 hours; try again "
        "in 86400 s. Import the file again then: what landed is not imported twice."
    )
    assert progress.errors == [
        {"conversation": "c2", "field": "messages", "message": refused},
        {"conversation": "c3", "field": "messages", "message": refused},
    ]
    assert Message.objects.filter(owner=owner).count() == 6


def test_an_import_counts_messages_other_doors_store_while_it_runs(owner, thread, settings):
    settings.DELLM_QUOTA_MESSAGES = 10
    allowance = ImportAllowance.start(owner_id=owner.pk)
    allowance.take(4)
    # A chat turn (or another import) stores 7 meanwhile: 3 are left, not 10.
    for index in range(7):
        message_store(owner_id=owner.pk, thread_id=thread.pk, role="user", content=f"turn {index}")
    allowance.take(3)
    with pytest.raises(QuotaExceeded) as refused:
        allowance.take(4)
    assert (refused.value.status, refused.value.retry_after) == (413, None)


def test_reimporting_a_file_counts_only_its_new_messages(owner, settings):
    settings.DELLM_QUOTA_MESSAGES_PER_DAY = 6
    assert history_import(owner_id=owner.pk, parsed=parse_file(jsonl(2, 2))).messages_imported == 4
    # The grown file holds 7, of which 3 are new: 4 + 2 fit, the conversation of 1 after them does not.
    progress = history_import(owner_id=owner.pk, parsed=parse_file(jsonl(2, 4, 1)))
    assert (progress.messages_imported, progress.conversations_failed) == (2, 1)
    assert progress.errors[0]["conversation"] == "c2"
