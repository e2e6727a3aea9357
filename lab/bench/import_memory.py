"""Peak resident memory of an import: the web request's path and the worker's, each its own process.

The export is the shape issue 20 measured (1,000 conversations x 10
messages, each node's metadata a list of small objects, which no parser
reads), grown to about 100 MB of JSON and zipped. The web path is
`import_job_create` on the zip as the request has it (a file): the sniff
and the stored upload. The worker path is `import_job_run` on that job: the
streamed parse, embeddings and the writer. A 200 MB export is offered to
the web path too and must be refused (DELLM_IMPORT_MAX_UNZIPPED_BYTES). Peak
RSS is `ru_maxrss` of each child, next to its RSS once Django and the
import code are loaded.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any
from unittest import mock

import psutil
from django.conf import settings

from lab.bench.imports import _user
from lab.bench.load import _database_url
from lab.bench.seed import owner_drop

ROOT = Path(settings.BASE_DIR)
CONVERSATIONS = 1_000
MESSAGES = 10
TARGET_MB = 300


def _conversation(c: int, metadata: int) -> bytes:
    mapping: dict[str, Any] = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
    parent = "root"
    for m in range(MESSAGES):
        node = f"c{c}-m{m}"
        mapping[parent]["children"].append(node)
        mapping[node] = {
            "id": node,
            "message": {
                "id": node,
                "author": {"role": "user" if m % 2 == 0 else "assistant"},
                "create_time": 1_700_000_000 + c * 3600 + m,
                "content": {"content_type": "text", "parts": [f"Message {m} of conversation {c}: about the trip."]},
                "metadata": [{"k": i, "v": "x"} for i in range(metadata)],
                "recipient": "all",
            },
            "parent": parent,
            "children": [],
        }
        parent = node
    return json.dumps({"id": f"conv-{c}", "title": f"C{c}", "mapping": mapping, "current_node": parent}).encode()


def _write_export(out: Any, megabytes: int, conversations: int) -> int:
    metadata = max(1, (megabytes * 1_000_000 // (conversations * MESSAGES) - 330) // 21)
    written = 0
    for c in range(conversations):
        chunk = (b"[" if c == 0 else b",") + _conversation(c, metadata)
        out.write(chunk)
        written += len(chunk)
    out.write(b"]")
    return written + 1


def export_zip(path: Path, *, megabytes: int, conversations: int = CONVERSATIONS) -> int:
    """Write a zipped conversations.json of about `megabytes` MB (10^6 bytes), one conversation at a time."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive, archive.open("conversations.json", "w") as out:
        return _write_export(out, megabytes, conversations)


def export_json(path: Path, *, megabytes: int, conversations: int = CONVERSATIONS) -> int:
    """The same, unzipped: the largest upload the web takes as it is (DELLM_IMPORT_MAX_BYTES)."""
    with path.open("wb") as out:
        return _write_export(out, megabytes, conversations)


def _child(role: str, path: str, arg: str) -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    from chat import imports

    baseline = psutil.Process().memory_info().rss
    started = time.perf_counter()
    if role == "web":
        owner = get_user_model().objects.get(pk=int(arg))
        try:
            # The job is run by the other child, not by a worker that may be listening.
            with open(path, "rb") as upload, mock.patch.object(imports, "_enqueue_job", lambda job_id: None):
                job = imports.import_job_create(owner=owner, data=upload, filename="export.zip")
        except imports.DomainError as exc:
            result: dict[str, Any] = {"refused": exc.message, "status": exc.status}
        else:
            result = {"job": job.pk, "format": job.format}
    else:
        job = imports.import_job_run(job_id=int(arg))
        assert job is not None
        result = {"status": job.status, "error": job.error, "imported": job.messages_imported}
    return result | {
        "seconds": time.perf_counter() - started,
        "baseline_rss_mb": baseline / 2**20,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _run_child(role: str, path: Path, arg: str) -> dict[str, Any]:
    code = (
        "import json, os, sys, django; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'dellm_site.settings'); "
        "django.setup(); from lab.bench.import_memory import _child; "
        "print(json.dumps(_child(*sys.argv[1:])))"
    )
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "DELLM_LOG_LEVEL": "WARNING",
        # This process's limits (a test's overrides included), not only the environment's.
        "DELLM_IMPORT_MAX_BYTES": str(settings.DELLM_IMPORT_MAX_BYTES),
        "DELLM_IMPORT_MAX_UNZIPPED_BYTES": str(settings.DELLM_IMPORT_MAX_UNZIPPED_BYTES),
    }
    done = subprocess.run(
        [sys.executable, "-c", code, role, str(path), arg],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if done.returncode != 0:
        return {"failed": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def import_memory_bench(
    *, megabytes: int = 100, refused_megabytes: int = 200, conversations: int = CONVERSATIONS
) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="dellm-bench-import-memory-"))
    owner = _user()
    try:
        accepted = folder / "accepted.zip"
        text_bytes = export_zip(accepted, megabytes=megabytes, conversations=conversations)
        web = _run_child("web", accepted, str(owner.pk))
        worker = _run_child("worker", accepted, str(web["job"])) if "job" in web else {"failed": "no job"}
        raw = folder / "conversations.json"
        raw_bytes = export_json(
            raw, megabytes=settings.DELLM_IMPORT_MAX_BYTES * 95 // 100 // 1_000_000, conversations=conversations
        )
        raw_web = _run_child("web", raw, str(owner.pk))
        raw_worker = _run_child("worker", raw, str(raw_web["job"])) if "job" in raw_web else {"failed": "no job"}
        refused = folder / "refused.zip"
        refused_bytes = export_zip(refused, megabytes=refused_megabytes, conversations=conversations)
        refused_web = _run_child("web", refused, str(owner.pk))
        return {
            "text_bytes": text_bytes,
            "zip_bytes": accepted.stat().st_size,
            "conversations": conversations,
            "messages": conversations * MESSAGES,
            "web": web,
            "worker": worker,
            "raw": {"text_bytes": raw_bytes, "web": raw_web, "worker": raw_worker},
            "refused": refused_web | {"text_bytes": refused_bytes, "zip_bytes": refused.stat().st_size},
            "limit_bytes": settings.DELLM_IMPORT_MAX_UNZIPPED_BYTES,
            "target_mb": TARGET_MB,
        }
    finally:
        owner_drop(owner.pk)
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()
