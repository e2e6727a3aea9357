"""Redacting part of a message by sentences and clauses (pure, offline)."""

import pytest

from provenance.redaction import redact_text, redaction_propose


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


def test_offline_proposal_is_the_rule_based_one(settings):
    settings.DELLM_LLM = "offline"
    assert redaction_propose(text="I live in Paris and work as a nurse.", semantic="I live in Paris") == (
        "I work as a nurse."
    )


def test_configured_model_rewrites_and_the_rules_stand_in_when_it_fails(openai_server, settings):
    settings.DELLM_LLM = "openai"
    openai_server.script = [("ok", "I am a nurse."), ("status", 400)]
    text = "I live in Paris and work as a nurse."
    assert redaction_propose(text=text, semantic="I live in Paris") == "I am a nurse."
    prompt = openai_server.requests[0]["body"]["messages"][-1]["content"]
    assert "I live in Paris" in prompt and text in prompt
    assert redaction_propose(text=text, semantic="I live in Paris") == "I work as a nurse."
    # Matched by meaning only (no matched word in it): no model call, the message goes whole.
    assert redaction_propose(text="I like tea.", semantic="I live in Paris") is None
    assert len(openai_server.requests) == 2
