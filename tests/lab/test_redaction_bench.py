import json
from io import StringIO

from django.contrib.auth import get_user_model
from django.core.management import call_command

from chat.models import Message


def test_redaction_bench_smoke_needs_no_seed_and_cleans_up(db, tmp_path, settings):
    settings.DELLM_REDACTION_MAX_MESSAGES = 2
    call_command(
        "dellm_bench",
        parts="redaction",
        redaction_messages=3,
        redaction_chars=2_000,
        out=str(tmp_path),
        stdout=StringIO(),
    )

    results = json.loads((tmp_path / "results.json").read_text())["results"]["redaction"]
    assert (results["messages"], results["chars"], results["caps"]["messages"]) == (3, 2_000, 2)
    counts = ("matched", "proposals", "unscanned")
    assert [results["capped"][key] for key in counts] == [3, 2, 1]
    assert [results["uncapped"][key] for key in counts] == [3, 3, 0]
    report = (tmp_path / "REPORT.md").read_text()
    assert "## A redaction preview, worst case" in report
    assert "| Redaction preview, 2,000-character query x 3 messages of 2,000 (caps as configured) <= 1 s |" in report
    assert Message.objects.count() == 0
    assert not get_user_model().objects.filter(username__startswith="redactbench-").exists()
