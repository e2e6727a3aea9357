"""Peak resident memory of an import: the web request's path and the worker's, each its own process.

The export is the shape measured (1,000 conversations x 10
messages, each node's metadata a list of small objects, which no parser
reads), grown to about 100 MB of JSON and zipped. The web path is
`import_job_create` on the zip as the request has it (a file): the sniff
and the stored upload. The worker path is `import_job_run` on that job: the
streamed parse, embeddings and the writer. A 200 MB export is offered to
the web path too and must be refused (DELLM_IMPORT_MAX_UNZIPPED_BYTES). Peak
RSS is each child's high-water mark (`VmHWM`), next to its RSS once Django
and the import code are loaded.

The second shape is the worst the limits allow for the worker, whose parse
keeps the messages' text: DELLM_IMPORT_MAX_MESSAGES messages of long real
text (TOFU's questions and answers, sentences drawn at random), each as long
as fills the unpacked file to just under DELLM_IMPORT_MAX_UNZIPPED_BYTES,
zipped under DELLM_IMPORT_MAX_BYTES. It is written one conversation at a time.
"""

from __future__ import annotations

import json
import os
import random
import re
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
TOFU = ROOT / "lab" / "evaluation" / "data" / "tofu" / "full.jsonl"
# The long-text shape fills the unpacked file to this share of DELLM_IMPORT_MAX_UNZIPPED_BYTES.
LONG_FILL = 0.97


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


def _tofu_sentences() -> list[str]:
    sentences: list[str] = []
    for line in TOFU.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        for text in (row["question"], row["answer"]):
            sentences += [s for s in re.split(r"(?<=[.!?])\s+", text) if s]
    return sentences


def _long_node(node: str, parent: str, role: str, created: float, text: str) -> dict[str, Any]:
    # Only the fields the parser reads: the more of the file is kept text, the more the worker holds.
    return {
        "id": node,
        "message": {
            "id": node,
            "author": {"role": role},
            "create_time": created,
            "content": {"content_type": "text", "parts": [text]},
        },
        "parent": parent,
        "children": [],
    }


def _long_conversation(c: int, per_conversation: int, texts: Any) -> bytes:
    mapping: dict[str, Any] = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
    parent = "root"
    start = 1_700_000_000.0 + c * 3600
    for m in range(per_conversation):
        node = f"c{c}-m{m}"
        mapping[parent]["children"].append(node)
        mapping[node] = _long_node(node, parent, "user" if m % 2 == 0 else "assistant", start + m, next(texts))
        parent = node
    document = {
        "id": f"conv-{c}",
        "conversation_id": f"conv-{c}",
        "title": f"Conversation {c}",
        "create_time": start,
        "mapping": mapping,
        "current_node": parent,
    }
    return json.dumps(document).encode()


def long_text_chars(*, messages: int, conversations: int, limit_bytes: int) -> int:
    """Characters per message that fill the unpacked file to LONG_FILL of `limit_bytes`."""
    per = messages // conversations
    # What the JSON costs around the text: one conversation of empty texts, and the list's commas.
    frame = len(_long_conversation(conversations - 1, per, iter(lambda: "", None))) + 1
    # Most text is ASCII; an accented letter or a curly quote is escaped as \uXXXX (6 bytes).
    return int((limit_bytes * LONG_FILL / conversations - frame) / per / 1.02)


def long_text_zip(path: Path, *, messages: int, conversations: int, chars: int, seed: int = 0) -> dict[str, int]:
    """A zipped conversations.json of `messages` messages of `chars` characters of real text, written lazily."""
    rng = random.Random(seed)
    pool = _tofu_sentences()
    kept = 0

    def texts() -> Any:
        nonlocal kept
        while True:
            parts, size = [], 0
            while size <= chars:
                sentence = rng.choice(pool)
                parts.append(sentence)
                size += len(sentence) + 1
            text = " ".join(parts)[:chars]
            kept += len(text)
            yield text

    source = texts()
    written = 0
    per = messages // conversations
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive, archive.open("conversations.json", "w") as out:
        for c in range(conversations):
            chunk = (b"[" if c == 0 else b",") + _long_conversation(c, per, source)
            out.write(chunk)
            written += len(chunk)
        out.write(b"]")
    return {"text_bytes": written + 1, "kept_chars": kept}


def _peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM): not `ru_maxrss`, which a child started by
    `subprocess` inherits from its parent (Linux keeps the larger across exec), so it reported the
    bench's own peak for any child smaller than the bench."""
    status = Path("/proc/self/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1]) / 1024


def _child(role: str, path: str, arg: str) -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    from chat.imports.history import DomainError
    from chat.imports.jobs import import_job_create, import_job_run

    baseline = psutil.Process().memory_info().rss
    started = time.perf_counter()
    if role == "web":
        owner = get_user_model().objects.get(pk=int(arg))
        try:
            # The job is run by the other child, not by a worker that may be listening.
            with open(path, "rb") as upload, mock.patch("chat.imports.jobs._enqueue_job", lambda job_id: None):
                job = import_job_create(owner=owner, data=upload, filename="export.zip")
        except DomainError as exc:
            result: dict[str, Any] = {"refused": exc.message, "status": exc.status}
        else:
            result = {"job": job.pk, "format": job.format}
    else:
        job = import_job_run(job_id=int(arg))
        assert job is not None
        result = {"status": job.status, "error": job.error, "imported": job.messages_imported}
    return result | {
        "seconds": time.perf_counter() - started,
        "baseline_rss_mb": baseline / 2**20,
        "peak_rss_mb": _peak_rss_mb(),
    }


def _run_child(role: str, path: Path, arg: str, *, timeout_s: float = 1800) -> dict[str, Any]:
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
        timeout=timeout_s,
        check=False,
    )
    if done.returncode != 0:
        return {"failed": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def import_memory_bench(
    *,
    megabytes: int = 100,
    refused_megabytes: int = 200,
    conversations: int = CONVERSATIONS,
    long_messages: int | None = None,
    long_conversations: int = 1_000,
) -> dict[str, Any]:
    """Both shapes; `long_messages` None: DELLM_IMPORT_MAX_MESSAGES, 0: no long-text case."""
    if long_messages is None:
        long_messages = settings.DELLM_IMPORT_MAX_MESSAGES
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
        long_text = _long_text_case(folder, long_messages, long_conversations) if long_messages else None
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
        } | ({"long": long_text} if long_text else {})
    finally:
        owner_drop(owner.pk)
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()


def _long_text_case(folder: Path, messages: int, conversations: int) -> dict[str, Any]:
    chars = long_text_chars(
        messages=messages, conversations=conversations, limit_bytes=settings.DELLM_IMPORT_MAX_UNZIPPED_BYTES
    )
    path = folder / "long.zip"
    started = time.perf_counter()
    written = long_text_zip(path, messages=messages, conversations=conversations, chars=chars)
    generated_s = time.perf_counter() - started
    # Its own account: the first export's conversations would otherwise be found stored already.
    owner = _user()
    try:
        web = _run_child("web", path, str(owner.pk))
        # Embedding and writing 100,000 long messages on 2 busy cores takes a while.
        worker = _run_child("worker", path, str(web["job"]), timeout_s=7200) if "job" in web else {"failed": "no job"}
    finally:
        owner_drop(owner.pk)
    return written | {
        "zip_bytes": path.stat().st_size,
        "messages": messages,
        "conversations": conversations,
        "chars": chars,
        "generated_s": generated_s,
        "web": web,
        "worker": worker,
    }
