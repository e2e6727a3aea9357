"""An upload's plaintext never gets a file name on disk, so nothing outlives a killed process."""

import asyncio
import json
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.handlers.asgi import ASGIHandler

from chat.imports import views

DJANGO_DEFAULT_HANDLERS = [
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]
# Over FILE_UPLOAD_MAX_MEMORY_SIZE (2.5 MB): Django would write it to a temporary file.
LARGE = "\n".join(
    json.dumps({"conversation": "c", "role": "user", "content": f"{n} " + "lorem ipsum " * 7000}) for n in range(40)
).encode()


def _files_while_uploading(api, monkeypatch, folder) -> list[str]:
    """What the upload folder holds while the import view has the uploaded file open."""
    seen = []

    def spy(**kwargs):
        seen.extend(sorted(os.listdir(folder)))
        return create(**kwargs)

    create = views.import_job_create
    monkeypatch.setattr(views, "import_job_create", spy)
    response = api.post("/api/imports/", {"file": SimpleUploadedFile("big.jsonl", LARGE)}, format="multipart")
    assert response.status_code == 202
    return seen


def test_a_large_upload_never_gets_a_named_temporary_file(api, settings, monkeypatch, tmp_path):
    assert len(LARGE) > settings.FILE_UPLOAD_MAX_MEMORY_SIZE
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path)
    configured = settings.FILE_UPLOAD_HANDLERS
    settings.FILE_UPLOAD_HANDLERS = DJANGO_DEFAULT_HANDLERS
    # Django's own handler: a named `.upload` file, which a killed process would leave behind.
    [name] = _files_while_uploading(api, monkeypatch, tmp_path)
    assert name.endswith(".upload.jsonl")
    settings.FILE_UPLOAD_HANDLERS = configured
    monkeypatch.undo()
    assert _files_while_uploading(api, monkeypatch, tmp_path) == []
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("size", [1024, 3 * 1024 * 1024])
def test_the_asgi_request_body_spool_has_no_name(monkeypatch, tmp_path, size):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    body = os.urandom(size)
    chunks = [{"type": "http.request", "body": body[i : i + 65536], "more_body": True} for i in range(0, size, 65536)]
    chunks[-1]["more_body"] = False

    async def receive():
        return chunks.pop(0)

    # In a thread of its own: the browser tests' Playwright keeps an event loop running in this one.
    with ThreadPoolExecutor(1) as pool:
        spool = pool.submit(asyncio.run, ASGIHandler().read_body(receive)).result()
    try:
        assert spool.read() == body
        assert os.listdir(tmp_path) == []
        if size > 2621440:  # rolled over to disk: a file with no name (O_TMPFILE, or unlinked at once)
            assert os.readlink(f"/proc/self/fd/{spool.fileno()}").endswith("(deleted)")
    finally:
        spool.close()
