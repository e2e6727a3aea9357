from pathlib import Path

import pytest
from django.conf import settings

from lab.evaluation.datasets import tofu_load
from lab.evaluation.personas import (
    FACTS_PER_PERSONA,
    QUESTIONS_PER_PERSONA,
    REQUESTS_PER_PERSONA,
    SAMPLE_PATH,
    persona_generate,
    pf_generate,
    pf_sample_lines,
)

needs_tofu = pytest.mark.skipif(
    not (Path(settings.DELLM_TOFU_DIR) / "full.jsonl").exists(), reason="TOFU data (DELLM_TOFU_DIR) is not present"
)


def test_pf_generator_same_seed_same_personas():
    assert pf_generate(count=5, seed=3) == pf_generate(count=5, seed=3)


def test_pf_generator_other_seed_other_personas():
    assert pf_generate(count=5, seed=3) != pf_generate(count=5, seed=4)


def test_pf_persona_does_not_depend_on_the_count():
    assert pf_generate(count=2, seed=0).scenarios == pf_generate(count=7, seed=0).scenarios[:2]


def test_pf_persona_has_the_paper_shape():
    for index in range(100):
        scenario = persona_generate(index=index, seed=0).to_scenario()
        facts = [s for s in scenario.statements if s.fact]
        requests = [s for s in scenario.statements if not s.fact]
        assert (len(facts), len(requests), len(scenario.questions)) == (
            FACTS_PER_PERSONA,
            REQUESTS_PER_PERSONA,
            QUESTIONS_PER_PERSONA,
        )
        assert [q.forget for q in scenario.questions].count(True) == 1
        fact_keys = {s.key for s in facts}
        assert all(q.fact_key in fact_keys for q in scenario.questions)
        (forget_key,) = scenario.forget_keys
        # The forget fact has a request that depends on it, so derived replies exist.
        assert f"req-{forget_key}" in {s.key for s in requests}
        # Gold answers are stated in their supporting fact, and requests never state them.
        for question in scenario.questions:
            assert question.gold in scenario.text_of(question.fact_key)
            assert all(question.gold not in r.text for r in requests)


def test_pf_committed_sample_matches_the_generator():
    assert SAMPLE_PATH.read_text(encoding="utf-8").splitlines() == pf_sample_lines()


@needs_tofu
def test_tofu_load_reference_split():
    (scenario,) = tofu_load(directory=Path(settings.DELLM_TOFU_DIR)).scenarios
    forget = [q for q in scenario.questions if q.forget]
    assert (len(scenario.statements), len(forget), len(scenario.questions)) == (440, 40, 440)
    assert scenario.forget_keys == tuple(q.fact_key for q in forget)
    assert {key.split("-")[0] for key in scenario.forget_keys} == {"a199", "a200"}
    assert scenario.text_of(forget[0].fact_key) == forget[0].gold


@needs_tofu
def test_tofu_load_samples_retain_questions_deterministically():
    def load():
        return tofu_load(directory=Path(settings.DELLM_TOFU_DIR), retain_questions=15, seed=1).scenarios[0]

    first, second = load(), load()
    assert first == second
    assert [q.forget for q in first.questions].count(False) == 15
    assert len(first.statements) == 440
