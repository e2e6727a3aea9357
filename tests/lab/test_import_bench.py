import json
import os
import subprocess
import sys
from io import StringIO

from django.contrib.auth import get_user_model
from django.core.management import call_command

from chat.models import Message
from lab.bench.load import _database_url
from tests.helpers import ROOT


def test_import_bench_smoke_needs_no_seed_and_cleans_up(db, tmp_path):
    call_command(
        "dellm_bench", parts="import", import_messages=40, import_edge_lengths="6", out=str(tmp_path), stdout=StringIO()
    )

    results = json.loads((tmp_path / "results.json").read_text())["results"]["import"]
    # Two conversations of 20 alternating messages: replies at positions 1, 3, ..., 19 of each, the
    # first with one edge, each later one with two (the previous reply, the question since).
    assert {k: results["main"][k] for k in ("messages", "edges", "failed")} == {
        "messages": 40,
        "edges": 2 * (1 + 9 * 2),
        "failed": 0,
    }
    assert [(row["length"], row["edges"]) for row in results["edge_cost"]] == [(6, 1 + 2 + 2)]
    report = (tmp_path / "REPORT.md").read_text()
    assert "## 7. Importing a chat history" in report
    assert "| Import of 10,000 messages (ChatGPT export, offline embeddings included) <= 60 s |" in report
    assert Message.objects.count() == 0
    assert not get_user_model().objects.filter(username__startswith="importbench-").exists()


def test_import_taint_bench_stores_nothing_of_a_chain_onto_a_deleted_message_and_cleans_up(db, tmp_path):
    call_command("dellm_bench", parts="import_taint", taint_messages=50, out=str(tmp_path), stdout=StringIO())

    results = json.loads((tmp_path / "results.json").read_text())["results"]["import_taint"]
    assert {k: results[k] for k in ("messages", "landed", "stored", "skipped", "rows_after")} == {
        "messages": 50,
        "landed": 0,
        "stored": 0,
        "skipped": 50,
        "rows_after": 1,
    }
    assert "## Import taint pass" in (tmp_path / "REPORT.md").read_text()
    assert Message.objects.count() == 0
    assert not get_user_model().objects.filter(username__startswith="taintbench-").exists()


def test_import_memory_bench_measures_both_paths_in_their_own_processes(transactional_db, settings, tmp_path):
    settings.DELLM_IMPORT_MAX_BYTES = 2_000_000
    settings.DELLM_IMPORT_MAX_UNZIPPED_BYTES = 3_000_000
    call_command(
        "dellm_bench",
        parts="import_memory",
        import_memory_mb=2,
        import_memory_refused_mb=4,
        import_memory_conversations=20,
        import_memory_long_messages=200,
        import_memory_long_conversations=10,
        out=str(tmp_path),
        stdout=StringIO(),
    )

    results = json.loads((tmp_path / "results.json").read_text())["results"]["import_memory"]
    assert (results["web"]["format"], results["worker"]["status"], results["worker"]["imported"]) == (
        "chatgpt",
        "done",
        200,
    )
    assert results["raw"]["worker"]["status"] == "done"
    assert results["refused"]["refused"] == "conversations.json is larger than 3000000 bytes."
    assert all(results[path]["peak_rss_mb"] > 0 for path in ("web", "worker"))
    # The long-text shape fills the unpacked limit with kept text, under the upload limit zipped.
    long_text = results["long"]
    assert (long_text["web"]["format"], long_text["worker"]["status"], long_text["worker"]["imported"]) == (
        "chatgpt",
        "done",
        200,
    )
    assert 2_800_000 < long_text["text_bytes"] <= 3_000_000
    assert long_text["kept_chars"] == 200 * long_text["chars"]
    assert long_text["zip_bytes"] <= 2_000_000
    report = (tmp_path / "REPORT.md").read_text()
    assert "## Memory of an import" in report
    assert f"| web: 200 messages of {long_text['chars']:,} characters (" in report
    assert Message.objects.count() == 0
    assert not get_user_model().objects.filter(username__startswith="importbench-").exists()


def test_a_child_reports_its_own_peak_memory_not_the_bench_process(db):
    """`ru_maxrss` of a child started by `subprocess` is at least its parent's peak (Linux keeps the
    larger across exec): the import memory bench reported the bench's own size for the web path."""
    held = b"\x01" * (400 * 2**20)  # written, so resident
    code = (
        "import json, os, resource, django; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'dellm_site.settings'); "
        "django.setup(); from lab.bench.import_memory import _peak_rss_mb; "
        "print(json.dumps([_peak_rss_mb(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024]))"
    )
    env = {**os.environ, "DATABASE_URL": _database_url()}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    own, inherited = json.loads(done.stdout.strip().splitlines()[-1])
    assert inherited > 400
    assert own < 250
    del held
