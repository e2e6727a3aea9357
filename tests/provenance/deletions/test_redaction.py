"""Redacting part of a message by sentences and clauses (pure, offline)."""

import pytest

from provenance.deletions.redaction import redact_text


@pytest.mark.parametrize(
    ("text", "select", "expected"),
    [
        ("I live in Paris and work as a nurse.", {"semantic": "I live in Paris"}, "I work as a nurse."),
        ("I live in Paris and work as a nurse.", {"exact": "live in Paris"}, "I work as a nurse."),
        ("I work as a nurse and I live in Paris.", {"exact": "Paris"}, "I work as a nurse."),
        ("I live in Paris, work as a nurse and love tea.", {"exact": "paris"}, "I work as a nurse and love tea."),
        ("We moved to Paris; we work as nurses but love it.", {"exact": "Paris"}, "We work as nurses but love it."),
        ("My code is 4321. I like tea!", {"exact": "4321"}, "I like tea."),
        ("I like tea. My code is 4321.", {"exact": "4321"}, "I like tea."),
        # A run of three kept clauses keeps all three (the first was lost before).
        ("I like tea, coffee, and milk, and I live in Paris.", {"exact": "Paris"}, "I like tea, coffee, and milk."),
        ("I live in Paris, I like tea, coffee and milk.", {"exact": "Paris"}, "I like tea, coffee and milk."),
        # Overlapping occurrences of a phrase are all matched.
        ("x, x, x and I sing.", {"exact": "x, x"}, "I sing."),
        ("I live in Paris but she lives in Lyon and sings.", {"semantic": "lives"}, "She sings."),
    ],
)
def test_redaction_drops_the_clauses_holding_the_matched_words(text, select, expected):
    assert redact_text(text=text, **select) == expected


@pytest.mark.parametrize(
    ("text", "select"),
    [
        ("I live in Paris.", {"semantic": "I live in Paris"}),  # everything would go: delete it whole
        ("I like tea.", {"exact": "Paris"}),  # nothing matched
        ("I like tea.", {}),
    ],
)
def test_no_redaction_when_nothing_or_everything_would_go(text, select):
    assert redact_text(text=text, **select) is None


def test_redaction_handles_long_adversarial_text_in_one_pass():
    # Separators and words without end: any backtracking tokenizer would blow up here.
    text = ("a, " * 20_000) + "Paris " + ("and b " * 20_000) + "."
    result = redact_text(text=text, exact="Paris")
    assert result is not None
    assert "Paris" not in result
