import json
from io import StringIO

from django.contrib.auth import get_user_model
from django.core.management import call_command

from chat.models import Message


def test_ctxindex_bench_smoke_recomputes_every_neighbour_and_cleans_up(db, tmp_path):
    call_command("dellm_bench", parts="ctxindex", ctxindex_neighbours=5, out=str(tmp_path), stdout=StringIO())

    results = json.loads((tmp_path / "results.json").read_text())["results"]["ctxindex"]
    assert (results["neighbours"], results["messages"], results["carrying"]) == (5, 15, 5)
    assert results["receipt_indexes"] == {"passed": True, "recomputed": 5, "stale": 0}
    assert (results["receipt_passed"], results["left_carrying"], results["left_unembedded"]) == (True, 0, 0)
    report = (tmp_path / "REPORT.md").read_text()
    assert "## Purging words that sit in their neighbours' indexes" in report
    assert Message.objects.count() == 0
    assert not get_user_model().objects.filter(username__startswith="ctxbench-").exists()
