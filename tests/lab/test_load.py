"""The smoke variant of the load benchmarks (`dellm_bench --only streams,soak`): tiny scale, real processes."""

from collections import Counter

import pytest
from django.contrib.auth import get_user_model

from lab.bench.load import USER_PREFIX, burst_bench, soak_bench, streams_bench
from lab.bench.report import report_write

pytestmark = pytest.mark.worker


def test_streams_bench_opens_and_finishes_every_stream(transactional_db):
    result = streams_bench(streams=6, users=2, pool=2, wait=60)

    assert (result["streams"], result["opened"], result["delivered"], result["failed_streams"]) == (6, 6, 6, 0)
    assert result["warm_up_delivered"] == 1
    assert 1 <= result["db_connections_peak"] <= 2
    assert result["errors"] == {}
    assert not get_user_model().objects.filter(username__startswith=USER_PREFIX).exists()


def test_soak_bench_runs_the_procfile_stack_to_the_end_of_every_turn_and_import(transactional_db, tmp_path):
    mix = {"chat": 2, "delete": 1, "import": 1, "read": 1}
    result = soak_bench(users=3, streams=5, seconds=20, warm_up=5, sample_every=1, mix=mix)

    assert result["server_errors"] == 0
    assert result["client_errors"] == {}
    assert result["actions"]["sign-in"] == 3
    assert result["unfinished_turns"] == 0
    assert result["unfinished_imports"] == 0
    assert "unfinished" not in result["turn_outcomes_seen"]
    assert "unfinished" not in result["import_outcomes_seen"]
    assert result["turns_posted"] == sum(result["turns"].values()) > 0
    assert result["imports_posted"] == sum(result["imports"].values())
    assert (result["held_streams_delivered"], result["held_streams_open_low"]) == (5, 5)
    assert (result["i1_violations"], result["users_checked_for_i1"]) == (0, 5)
    # Every process of the Procfile's three types, each sampled and fitted.
    roles = Counter((row["process"], row["role"]) for row in result["memory"])
    assert roles == {
        ("web", "main"): 1,  # uvicorn's reloader (--reload)
        ("web", "server"): 1,
        ("web", "resource tracker"): 1,
        ("worker", "main"): 1,
        ("worker", "child"): 2,  # --concurrency 2
        ("beat", "main"): 1,
    }
    assert all(row["slope_mb_per_min"] is not None for row in result["memory"])
    peak, budget = result["db_connections_peak"], result["db_connections_budget"]
    assert budget == {"web": 20, "worker": 4, "beat": 20}
    assert 1 <= peak["web"] <= budget["web"]
    assert 1 <= peak["worker"] <= budget["worker"]
    assert peak["beat"] <= budget["beat"]
    assert not get_user_model().objects.filter(username__startswith=USER_PREFIX).exists()
    # The report: its target row, its section, and the memory chart.
    meta = {"command": "dellm_bench --parts soak", "data": "-", "vectors": "-", "machine": "-", "seconds": 1.0}
    paths = report_write(out=tmp_path, meta=meta, results={"soak": result})
    report = paths["report"].read_text()
    assert "| Soak of the `make run` stack, 3 users chatting, importing, deleting and undoing with 5 streams" in report
    assert "## 8. Soak: the `make run` stack under a mix of users" in report
    assert "soak_memory.png" in paths


def test_burst_bench_meets_a_cold_stack_with_every_user_at_once(transactional_db, tmp_path):
    result = burst_bench(users=3, messages=2, logs=tmp_path)

    assert result["server_errors"] == 0, result
    assert result["client_errors"] == {}
    assert result["turns"] == {"done": 6}
    # Sign-in, thread, two messages (post, stream), the list, the preview, its confirm and its undo, for each.
    assert result["statuses"]["200"] >= 3 * 4 and result["statuses"]["202"] == 6
    assert not get_user_model().objects.filter(username__startswith=USER_PREFIX).exists()
