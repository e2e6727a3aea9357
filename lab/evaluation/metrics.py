"""Scoring answers and summarizing runs.

Offline, an answer counts as correct when its ROUGE-L recall of the gold
answer reaches `HIT_RECALL` (the gold answer's content is mostly there). With a
real OpenAI-compatible model configured, an LLM judge decides instead, with a
judge prompt written after MemGPT's; ROUGE-L recall is reported either way.
"""

import re
from dataclasses import dataclass

from django.conf import settings
from django.db import connection
from rouge_score import rouge_scorer

from chat.llm import openai_client, upstream_error

HIT_RECALL = 0.5
# The paper's reading of "no higher than no-memory" and "retain unchanged":
# differences within this many utility points count as equal.
TOLERANCE = 2.0

# rouge-score's own tokenizer and nltk's Porter stemmer are plain code; nothing
# here needs nltk data files, so nothing is downloaded at run time.
_scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def rouge_recall(*, gold: str, answer: str) -> float:
    return _scorer.score(gold, answer)["rougeL"].recall


def lexemes(texts: list[str]) -> list[set[str]]:
    """Each text's lexemes as the product's lexical index makes them (english config: stemmed, no stop words)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tsvector_to_array(to_tsvector('english', t)) FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, i)"
            " ORDER BY i",
            [texts],
        )
        return [set(row[0]) for row in cursor.fetchall()]


def leaked_words(*, fact: str, question: str, kept: set[str], answer: str) -> set[str]:
    """The lexemes of a forgotten `fact` in `answer` that neither the question nor anything `kept` holds.

    ROUGE-L recall alone cannot tell a leak from a template: TOFU's answers
    share their phrasing across authors ("... was born in the city of ...",
    "has been honored with the ... award"), so another author's fact can pass
    HIT_RECALL for a forgotten one. A lexeme that only the forgotten fact had
    (a name, a place, a prize) can only come from it.
    """
    fact_words, question_words, answer_words = lexemes([fact, question, answer])
    return (fact_words - question_words - kept) & answer_words


JUDGE_PROMPT = """You grade whether an assistant remembered something a user told it earlier.
You get (1) the user's question, (2) the gold answer, (3) the assistant's answer.
Gold answers are short; the assistant's answer may be long. Be generous: if the
assistant's answer contains the information in the gold answer, or clearly
refers to the same thing, it is CORRECT. If it misses it, says it does not know,
or gives different information, it is WRONG.

Question: {question}
Gold answer: {gold}
Assistant's answer: {answer}

Explain your reasoning in one sentence, then end with one word: CORRECT or WRONG."""

_VERDICT = re.compile(r"\b(CORRECT|WRONG)\b")


def judge_verdict(text: str) -> bool:
    """The judge's last CORRECT/WRONG word; anything else counts as wrong."""
    verdicts = _VERDICT.findall(text or "")
    return bool(verdicts) and verdicts[-1] == "CORRECT"


class Judge:
    """LLM judge over the configured OpenAI-compatible endpoint (the chat model)."""

    def __init__(self):
        self._client = openai_client()

    def __call__(self, *, question: str, gold: str, answer: str) -> bool:
        import openai

        prompt = JUDGE_PROMPT.format(question=question, gold=gold, answer=answer)
        try:
            response = self._client.chat.completions.create(
                model=settings.DELLM_CHAT_MODEL, messages=[{"role": "user", "content": prompt}], temperature=0
            )
        except openai.OpenAIError as exc:
            raise upstream_error(exc) from exc
        return bool(response.choices) and judge_verdict(response.choices[0].message.content)


def judge_get() -> Judge | None:
    return Judge() if settings.DELLM_LLM == "openai" else None


@dataclass(frozen=True)
class Score:
    rouge: float
    hit: bool
    judge: bool | None

    @property
    def correct(self) -> bool:
        return self.hit if self.judge is None else self.judge


def score_answer(*, question: str, gold: str, answer: str, judge: Judge | None) -> Score:
    rouge = rouge_recall(gold=gold, answer=answer)
    verdict = None if judge is None else judge(question=question, gold=gold, answer=answer)
    return Score(rouge=rouge, hit=rouge >= HIT_RECALL, judge=verdict)


def _pct(values: list[bool]) -> float | None:
    return round(100.0 * sum(values) / len(values), 2) if values else None


def _mean(values: list[float]) -> float | None:
    return round(100.0 * sum(values) / len(values), 2) if values else None


def summarize(*, records: list[dict], deletions: list[dict]) -> list[dict]:
    """One row per (dataset, system): utilities in percent, deletion rate, collateral.

    `records` hold one answer each (dataset, system, forget, phase, rouge,
    correct); `deletions` one scenario's deletion outcome each.
    """
    keys = list(dict.fromkeys((r["dataset"], r["system"]) for r in records))
    rows = []
    for dataset, system in keys:
        mine = [r for r in records if r["dataset"] == dataset and r["system"] == system]
        row = {"dataset": dataset, "system": system}
        for part, forget in (("forget", True), ("retain", False)):
            for phase in ("before", "after"):
                chosen = [r for r in mine if r["forget"] is forget and r["phase"] == phase]
                row[f"{part}_{phase}"] = _pct([r["correct"] for r in chosen])
                row[f"{part}_{phase}_rouge"] = _mean([r["rouge"] for r in chosen])
        before = [r for r in mine if r["phase"] == "before"]
        row["utility"] = _pct([r["correct"] for r in before])
        row["utility_rouge"] = _mean([r["rouge"] for r in before])
        after = {(r["scenario"], r["question"]): r["correct"] for r in mine if r["forget"] and r["phase"] == "after"}
        known = [(r["scenario"], r["question"]) for r in before if r["forget"] and r["correct"]]
        row["deletion_rate"] = _pct([not after[key] for key in known])
        done = [d for d in deletions if d["dataset"] == dataset and d["system"] == system]
        row["deleted"] = sum(d["deleted"] for d in done)
        row["retain_facts_lost"] = sum(d["retain_facts_lost"] for d in done)
        row["taint_violations"] = sum(d["taint_violations"] for d in done)
        row["residual_copies"] = sum(d["residual_copies"] for d in done)
        # Facts drawn from the statements before forgetting (dellm:facts), and those of them forgetting removed.
        row["facts"] = sum(d.get("facts", 0) for d in done)
        row["facts_removed"] = sum(d.get("facts_removed", 0) for d in done)
        # Answers after deletion that hold a lexeme only a forgotten fact had (`leaked_words`).
        row["forget_leaks"] = sum(r.get("leaked", 0) > 0 for r in mine if r["forget"] and r["phase"] == "after")
        # Collateral loss: retain questions answered before forgetting and not after.
        retain_after = {
            (r["scenario"], r["question"]): r["correct"] for r in mine if not r["forget"] and r["phase"] == "after"
        }
        answered = [(r["scenario"], r["question"]) for r in before if not r["forget"] and r["correct"]]
        row["collateral_loss"] = sum(not retain_after[key] for key in answered)
        row["collateral_loss_pct"] = _pct([not retain_after[key] for key in answered])
        row["model_calls"] = sum(d.get("model_calls", 0) for d in done)
        rows.append(row)
    return rows


def relations_check(rows: list[dict]) -> list[dict]:
    """The relations the paper's results imply, checked per dataset."""
    checks = []
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        by = {r["system"]: r for r in rows if r["dataset"] == dataset}
        dellm, none = by.get("dellm"), by.get("no_memory")
        if dellm and none:
            checks.append(
                {
                    "dataset": dataset,
                    "relation": "dellm forget utility after deletion <= no_memory's + 2",
                    "holds": dellm["forget_after"] <= none["forget_after"] + TOLERANCE,
                    "detail": f"{dellm['forget_after']} vs {none['forget_after']}",
                }
            )
        if dellm:
            checks.append(
                {
                    "dataset": dataset,
                    "relation": "dellm retain utility after deletion within 2 of before",
                    "holds": abs(dellm["retain_after"] - dellm["retain_before"]) <= TOLERANCE,
                    "detail": f"{dellm['retain_before']} -> {dellm['retain_after']}",
                }
            )
            checks.append(
                {
                    "dataset": dataset,
                    "relation": "dellm's answers after deletion hold no word that only a forgotten fact had",
                    "holds": dellm["forget_leaks"] == 0,
                    "detail": f"{dellm['forget_leaks']} answers",
                }
            )
            checks.append(
                {
                    "dataset": dataset,
                    "relation": "dellm leaves no copy of a forget fact and loses no retain fact",
                    "holds": dellm["residual_copies"] == 0 and dellm["retain_facts_lost"] == 0,
                    "detail": f"{dellm['residual_copies']} copies, {dellm['retain_facts_lost']} retain facts lost",
                }
            )
        sweep = {name: row for name, row in by.items() if name.startswith("semantic:")}
        if sweep and dellm and none:
            both = [
                name
                for name, row in sweep.items()
                if row["forget_after"] <= none["forget_after"] + TOLERANCE
                and abs(row["retain_after"] - row["retain_before"]) <= TOLERANCE
            ]
            clean = [
                name for name, row in sweep.items() if row["residual_copies"] == 0 and row["retain_facts_lost"] == 0
            ]
            checks.append(
                {
                    "dataset": dataset,
                    "relation": "no semantic:<t> both leaves no copy of a forget fact and loses no retain fact",
                    "holds": not clean,
                    "detail": ", ".join(clean) if clean else "trade-off at every threshold",
                }
            )
            checks.append(
                {
                    "dataset": dataset,
                    "relation": "no semantic:<t> both forgets (like no_memory) and retains (like before)",
                    "holds": not both,
                    "detail": ", ".join(both) if both else "trade-off at every threshold",
                }
            )
    return checks
