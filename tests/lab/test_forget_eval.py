"""The forget-request set runs through the natural-language door and reports per category (make eval)."""

import json

import pytest
from django.core.management import call_command

from lab.evaluation.forget_cases import CATEGORIES, PER_CATEGORY, forget_cases
from lab.evaluation.forget_run import held

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_set_has_every_category_and_two_hundred_cases_each_with_something_to_forget_and_to_keep():
    cases = forget_cases()
    assert len(cases) == len(CATEGORIES) * PER_CATEGORY >= 200
    assert forget_cases() == cases  # the same on every run
    assert len({case.key for case in cases}) == len(cases)
    for case in cases:
        assert case.forget and case.keep
        # Each span is said by one of the case's statements, or the case could not be scored.
        for span in (*case.forget, *case.keep):
            assert any(held(statement, span) for statement in case.statements), case


def test_a_small_run_scores_each_category_and_writes_its_report(tmp_path):
    call_command("dellm_forget_eval", "--per-category", "2", "--out", str(tmp_path), "--no-progress")

    report = json.loads((tmp_path / "forget-requests.json").read_text())
    rows = {row["category"]: row for row in report["summary"]}
    assert set(rows) == {*CATEGORIES, "all"} and rows["all"]["cases"] == 2 * len(CATEGORIES)
    # Identifiers are matched as identifiers: the named one goes, its neighbour stays.
    assert rows["identifier_neighbours"]["passed"] == rows["identifier_written_otherwise"]["passed"] == 1.0
    assert "| category | cases | passed | forgotten | kept |" in (tmp_path / "forget-requests.md").read_text()
