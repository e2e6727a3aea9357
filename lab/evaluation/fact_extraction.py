"""Extraction precision and recall against the generated sets' labelled facts (no database, no model).

PF's statements are labelled: a persona's facts, and requests that use them
without stating them. CM's and DIA's user turns are labelled too: a turn
that states a fact of the conversation has its key, filler has none. A
statement counts as extracted when the extractor draws at least one fact
from it: precision is the share of statements with a fact that are labelled
facts, recall the share of labelled facts with one. `facts per statement`
says how much it draws from each. The offline extractor (chat/statements.py)
is measured; the model's would need its calls.
"""

from collections.abc import Iterable

from chat.statements import statements
from lab.evaluation.datasets import Dataset
from lab.evaluation.memory import Conversation


def _row(name: str, labelled: Iterable[tuple[str, bool]]) -> dict:
    found = tp = fp = facts = total = 0
    for text, is_fact in labelled:
        drawn = statements(text)
        total += 1
        facts += len(drawn)
        found += is_fact
        if drawn and is_fact:
            tp += 1
        elif drawn:
            fp += 1
    return {
        "data": name,
        "statements": total,
        "labelled": found,
        "precision": tp / (tp + fp) if tp + fp else 0.0,
        "recall": tp / found if found else 0.0,
        "facts_per_statement": facts / total if total else 0.0,
    }


def extraction_quality(*, pf: Dataset | None, conversations: dict[str, list[Conversation]]) -> list[dict]:
    """One row per data set: PF's statements, and the user turns of CM's and DIA's conversations."""
    rows = []
    if pf is not None:
        rows.append(_row("PF", ((s.text, s.fact) for scenario in pf.scenarios for s in scenario.statements)))
    for name, generated in conversations.items():
        turns = (
            (turn.text, bool(turn.key))
            for conversation in generated
            for session in conversation.sessions
            for turn in session
            if turn.role == "user"
        )
        rows.append(_row(name, turns))
    return rows


def extraction_markdown(rows: list[dict]) -> str:
    lines = ["| data | statements | labelled facts | precision | recall | facts per statement |\n|" + "---|" * 6]
    lines += [
        f"| {r['data']} | {r['statements']} | {r['labelled']} | {r['precision']:.3f} | {r['recall']:.3f} "
        f"| {r['facts_per_statement']:.2f} |"
        for r in rows
    ]
    return "\n\n".join(
        [
            "## Fact extraction (offline rules) against the labelled facts",
            "A statement counts as extracted when at least one fact is drawn from it (chat/statements.py). PF: a "
            "persona's facts against its requests; CM, DIA: the user turns that state a fact against filler.",
            "\n".join(lines),
        ]
    )
