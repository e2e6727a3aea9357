import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from lab.evaluation.metrics import (
    Judge,
    judge_verdict,
    leaked_words,
    lexemes,
    relations_check,
    rouge_recall,
    score_answer,
    summarize,
)


def test_rouge_recall_is_the_share_of_the_gold_answer_found():
    assert rouge_recall(gold="Lisbon", answer="From what you told me: “I live in Lisbon.”") == 1.0
    assert rouge_recall(gold="green tea", answer="I drink green coffee") == 0.5
    assert rouge_recall(gold="Lisbon", answer="I don't have anything in memory about that yet.") == 0.0


def test_score_answer_offline_uses_the_recall_threshold():
    assert score_answer(question="q", gold="red hatchback", answer="a blue car", judge=None).correct is False
    assert score_answer(question="q", gold="red hatchback", answer="my red hatchback", judge=None).correct is True


def test_a_template_shared_with_a_kept_fact_is_no_leak_a_word_only_the_forgotten_fact_had_is(db):
    fact = "Basil Mahfouz Al-Kuwaiti was born in Kuwait City, Kuwait."
    question = "In which city and country was Basil Mahfouz Al-Kuwaiti born?"
    other = "The renowned fantasy author Aisha Al-Hamad was born in the beautiful city of Manama, Bahrain."
    (kept,) = lexemes([other])
    # Another author's fact passes ROUGE-L's threshold for the forgotten one, and holds none of its own words.
    assert rouge_recall(gold=fact, answer=f"From what you told me: “{other}”") >= 0.5
    assert leaked_words(fact=fact, question=question, kept=kept, answer=f"From what you told me: “{other}”") == set()
    assert leaked_words(fact=fact, question=question, kept=kept, answer="He was born in Kuwait.") == {"kuwait"}
    # Stop words are no leak: the responder's own "I don't have anything" shares "have" with "I have a ferret".
    assert leaked_words(fact="I have a ferret.", question="Pet?", kept=set(), answer="I don't have anything.") == set()


def test_judge_verdict_takes_the_last_word():
    assert judge_verdict("It names the same city. CORRECT") is True
    assert judge_verdict("Not CORRECT: a different city. WRONG") is False
    assert judge_verdict("I cannot tell.") is False


def _record(system, forget, phase, correct, scenario="s", question="q1", leaked=None):
    record = {
        "dataset": "pf",
        "system": system,
        "scenario": scenario,
        "question": question,
        "forget": forget,
        "phase": phase,
        "rouge": 1.0 if correct else 0.0,
        "correct": correct,
    }
    return record if leaked is None else {**record, "leaked": leaked}


def _deletion(system, deleted=0, lost=0, copies=0):
    return {
        "dataset": "pf",
        "system": system,
        "deleted": deleted,
        "retain_facts_lost": lost,
        "taint_violations": 0,
        "residual_copies": copies,
    }


def test_summarize_utilities_and_deletion_rate():
    records = [
        _record("dellm", True, "before", True, question="f1"),
        _record("dellm", True, "before", True, question="f2"),
        _record("dellm", True, "before", False, question="f3"),
        _record("dellm", True, "after", False, question="f1", leaked=0),
        _record("dellm", True, "after", True, question="f2", leaked=2),
        _record("dellm", True, "after", False, question="f3", leaked=0),
        _record("dellm", False, "before", True, question="r1"),
        _record("dellm", False, "after", True, question="r1"),
    ]
    (row,) = summarize(records=records, deletions=[_deletion("dellm", deleted=5, copies=1)])
    assert (row["forget_before"], row["forget_after"]) == (66.67, 33.33)
    assert (row["retain_before"], row["retain_after"]) == (100.0, 100.0)
    assert row["utility"] == 75.0
    # Of the two forget questions answered before, one is no longer answered.
    assert row["deletion_rate"] == 50.0
    assert (row["deleted"], row["residual_copies"]) == (5, 1)
    # One answer after deletion held words only its forgotten fact had.
    assert row["forget_leaks"] == 1


def _row(system, forget_after, retain_before, retain_after, lost=0, copies=0, leaks=0):
    return {
        "dataset": "pf",
        "system": system,
        "forget_after": forget_after,
        "retain_before": retain_before,
        "retain_after": retain_after,
        "retain_facts_lost": lost,
        "residual_copies": copies,
        "forget_leaks": leaks,
    }


def test_relations_check_flags_a_semantic_threshold_that_does_both():
    rows = [
        _row("dellm", 1.0, 80.0, 79.0),
        _row("no_memory", 0.0, 0.0, 0.0),
        _row("semantic:0.2", 0.0, 80.0, 40.0, lost=9),
        _row("semantic:0.8", 0.0, 80.0, 80.0, copies=3),
    ]
    holds = {c["relation"]: (c["holds"], c["detail"]) for c in relations_check(rows)}
    assert holds["dellm forget utility after deletion <= no_memory's + 2"] == (True, "1.0 vs 0.0")
    assert holds["dellm retain utility after deletion within 2 of before"] == (True, "80.0 -> 79.0")
    assert holds["dellm's answers after deletion hold no word that only a forgotten fact had"] == (True, "0 answers")
    assert holds["no semantic:<t> both leaves no copy of a forget fact and loses no retain fact"] == (
        True,
        "trade-off at every threshold",
    )
    assert holds["no semantic:<t> both forgets (like no_memory) and retains (like before)"] == (False, "semantic:0.8")
    leaking = relations_check([_row("dellm", 1.0, 80.0, 79.0, leaks=2)])
    assert {c["relation"]: c["holds"] for c in leaking}[
        "dellm's answers after deletion hold no word that only a forgotten fact had"
    ] is False


class _FakeJudgeEndpoint(BaseHTTPRequestHandler):
    prompts: list[str] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][-1]["content"]
        self.prompts.append(prompt)
        verdict = "CORRECT" if "Lisbon" in prompt.split("Assistant's answer:")[1] else "WRONG"
        payload = json.dumps(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": "judge",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": f"Same city named. {verdict}"},
                    }
                ],
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def judge_endpoint(settings):
    server = HTTPServer(("127.0.0.1", 0), _FakeJudgeEndpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.OPENAI_BASE_URL = f"http://127.0.0.1:{server.server_port}/v1"
    settings.OPENAI_API_KEY = "test"
    _FakeJudgeEndpoint.prompts = []
    yield _FakeJudgeEndpoint.prompts
    server.shutdown()
    server.server_close()


def test_judge_asks_the_endpoint_and_reads_its_verdict(judge_endpoint):
    judge = Judge()
    assert judge(question="Which city do I live in?", gold="Lisbon", answer="You live in Lisbon.") is True
    assert judge(question="Which city do I live in?", gold="Lisbon", answer="I don't know.") is False
    assert "Gold answer: Lisbon" in judge_endpoint[0]
