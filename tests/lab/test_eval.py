"""The smoke variant of `manage.py dellm_eval`: the paper's relations on a tiny run.

One run (about 15 s) is checked by one test, so the suite pays for it once.
"""

import json
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command

from lab.evaluation.metrics import TOLERANCE
from lab.evaluation.systems import USERNAME_PREFIX

pytestmark = pytest.mark.skipif(
    not (Path(settings.DELLM_TOFU_DIR) / "full.jsonl").exists(), reason="TOFU data (DELLM_TOFU_DIR) is not present"
)


def test_smoke_eval_reproduces_the_papers_relations(db, tmp_path):
    call_command("dellm_eval", "--smoke", "--thresholds", "0.1,0.5,0.8", "--no-progress", "--out", str(tmp_path))

    assert not get_user_model().objects.filter(username__startswith=USERNAME_PREFIX).exists()
    report = (tmp_path / "report.md").read_text()
    for title in (
        "Table 1: utility",
        "Table 2: forget questions",
        "Table 3: retain questions",
        "thresholds.png",
        "Fact extraction (offline rules) against the labelled facts",
    ):
        assert title in report
    assert (tmp_path / "thresholds.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    payload = json.loads((tmp_path / "results.json").read_text())
    # Scores and ids only: no answer text is kept.
    assert all("rouge" in r and "answer" not in r for r in payload["answers"])
    rows = {(r["dataset"], r["system"]): r for r in payload["summary"]}
    systems = [
        "dellm",
        "dellm:facts",
        "dellm:regenerate",
        "dellm:redact",
        "no_memory",
        "full_memory",
        "semantic:0.1",
        "semantic:0.5",
        "semantic:0.8",
    ]
    assert sorted(rows) == sorted((d, s) for d in ("pf", "tofu") for s in systems)

    for dataset in ("pf", "tofu"):
        dellm, none = rows[(dataset, "dellm")], rows[(dataset, "no_memory")]
        forget_facts = sum(
            1
            for r in payload["answers"]
            if (r["dataset"], r["system"], r["phase"]) == (dataset, "dellm", "before") and r["forget"]
        )
        # DeLLM: knew the forget facts, then answers them no better than no memory, keeps the rest.
        assert dellm["forget_before"] > none["forget_before"] + TOLERANCE
        assert dellm["forget_after"] <= none["forget_after"] + TOLERANCE
        assert abs(dellm["retain_after"] - dellm["retain_before"]) <= TOLERANCE
        assert (dellm["residual_copies"], dellm["retain_facts_lost"], dellm["taint_violations"]) == (0, 0, 0)
        # No answer after deletion holds a word only a forgotten fact had; full memory's still do.
        assert dellm["forget_leaks"] == 0
        assert rows[(dataset, "full_memory")]["forget_leaks"] > 0
        # The facts and the replies derived from them.
        assert dellm["deleted"] > forget_facts

        # Semantic deletion: a low threshold destroys retain facts, a high one leaves copies where replies
        # carry the facts: the offline responder tells a personal fact back ("you live in ..."), but
        # acknowledges a statement it draws no fact from (TOFU's, about authors) with "Noted." alone.
        low, high = rows[(dataset, "semantic:0.1")], rows[(dataset, "semantic:0.8")]
        assert low["retain_facts_lost"] > 0
        assert low["retain_after"] < low["retain_before"] - TOLERANCE
        assert high["retain_facts_lost"] == 0
        assert (high["residual_copies"] > 0) == (dataset == "pf")

        # With facts drawn from every statement: forgets as faithfully (a fact goes with its source), keeps the rest.
        facts = rows[(dataset, "dellm:facts")]
        assert facts["forget_before"] > none["forget_before"] + TOLERANCE
        assert facts["forget_after"] <= none["forget_after"] + TOLERANCE
        assert abs(facts["retain_after"] - facts["retain_before"]) <= TOLERANCE
        assert (facts["residual_copies"], facts["retain_facts_lost"], facts["taint_violations"]) == (0, 0, 0)
        assert facts["forget_leaks"] == 0
        # Forgetting took the facts of the forgotten statements (a fact left would be a residual copy: its text
        # holds the statement); PF's statements each give one.
        if dataset == "pf":
            assert facts["facts_removed"] > 0 and facts["facts"] > facts["facts_removed"]
        assert dellm["facts"] == 0

        # Regenerating: forgets like dellm, rewrites what dellm drops (one model call each), leaves no taint.
        for name in ("dellm:regenerate", "dellm:redact"):
            row = rows[(dataset, name)]
            assert row["forget_after"] <= none["forget_after"] + TOLERANCE
            assert (row["residual_copies"], row["taint_violations"]) == (0, 0)
            assert row["collateral_loss"] <= dellm["collateral_loss"]
            assert row["model_calls"] > 0
        assert dellm["model_calls"] == 0

        # Asking the offline responder to forget changes nothing.
        full = rows[(dataset, "full_memory")]
        assert (full["forget_after"], full["deleted"]) == (full["forget_before"], 0)
