"""Runs systems over datasets: share, ask, forget, ask again; collect scores (never text)."""

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import connection

from chat.models import ContextEdge, Message
from lab.evaluation.datasets import Dataset, Scenario
from lab.evaluation.metrics import Judge, leaked_words, lexemes, score_answer
from lab.evaluation.systems import EvalOwner, System
from provenance.dependents import taint_violations


def tick_none() -> None:
    return None


@dataclass
class Results:
    records: list[dict] = field(default_factory=list)
    deletions: list[dict] = field(default_factory=list)


def statistics_refresh() -> None:
    """ANALYZE the tables a scenario just filled.

    An owner's whole history arrives in seconds, long before autovacuum's next
    ANALYZE; with statistics from before it, the planner takes the owner for
    empty and walks all of its edges for every probe's Dep and receipt (tens
    of milliseconds each instead of well under one on a whole-history owner).
    """
    with connection.cursor() as cursor:
        # The columns the Dep, receipt and retrieval queries filter and join on.
        cursor.execute(
            f"ANALYZE {Message._meta.db_table} (id, owner_id, status, seq, deleted_by_id), "
            f"{ContextEdge._meta.db_table} (owner_id, source_id, target_id)"
        )


def scenario_run(
    *,
    system: System,
    dataset: str,
    scenario: Scenario,
    run_id: str,
    judge: Judge | None,
    results: Results,
    tick: Callable[[], object],
) -> None:
    """One system on one scenario, in its own throwaway owner (deleted at the end, also on failure).

    Steps: send every statement as a turn; ask every question (probes leave no
    trace); forget each forget fact the system's way; ask every question again.
    The deletion outcome counts live messages removed (probes excluded), the
    retain facts among them, and the live messages still holding a word only a
    forget fact had (derived copies the deletion missed, quoted or told back).
    """
    owner = EvalOwner(system=system, run_id=run_id, scenario_key=scenario.key)
    base = {"dataset": dataset, "system": system.name, "scenario": scenario.key}
    try:
        ids = {}
        for statement in scenario.statements:
            ids[statement.key] = owner.say(statement.text)[0]
            tick()
        statistics_refresh()
        _ask_all(
            owner=owner, scenario=scenario, phase="before", judge=judge, into=results.records, base=base, tick=tick
        )
        live_before = owner.live_ids()
        facts_before = owner.fact_ids()
        for key in scenario.forget_keys:
            owner.forget(message_id=ids[key], text=scenario.forget_text(key))
        removed = live_before - owner.live_ids()
        kept = set().union(*lexemes(scenario.kept_texts()))
        forgotten = {ids[key] for key in scenario.forget_keys}
        retained_facts = {ids[s.key] for s in scenario.statements if s.fact} - forgotten
        results.deletions.append(
            {
                **base,
                "deleted": len(removed),
                "retain_facts_lost": len(removed & retained_facts),
                "taint_violations": len(taint_violations(owner_id=owner.user.pk)),
                "residual_copies": sum(owner.copies(scenario.forget_text(key), kept) for key in scenario.forget_keys),
                "model_calls": owner.forget_calls,
                "facts": len(facts_before),
                "facts_removed": len(facts_before & removed),
            }
        )
        _ask_all(
            owner=owner,
            scenario=scenario,
            phase="after",
            judge=judge,
            into=results.records,
            base=base,
            tick=tick,
            kept=kept,
        )
    finally:
        owner.close()


def _ask_all(
    *,
    owner: EvalOwner,
    scenario: Scenario,
    phase: str,
    judge,
    into: list,
    base: dict,
    tick,
    kept: set[str] | None = None,
) -> None:
    """Ask every question. After forgetting (`kept`: the lexemes of what is left), a forget question's
    record counts the lexemes of its forgotten fact the answer holds (`leaked`; not the lexemes themselves)."""
    for question in scenario.questions:
        answer = owner.ask(question.text)
        tick()
        score = score_answer(question=question.text, gold=question.gold, answer=answer, judge=judge)
        record = {
            **base,
            "question": question.key,
            "forget": question.forget,
            "phase": phase,
            "rouge": round(score.rouge, 4),
            "hit": score.hit,
            "judge": score.judge,
            "correct": score.correct,
        }
        if kept is not None and question.forget:
            fact = scenario.forget_text(question.fact_key)
            record["leaked"] = len(leaked_words(fact=fact, question=question.text, kept=kept, answer=answer))
        into.append(record)


def evaluate(
    *,
    systems: list[System],
    datasets: list[Dataset],
    run_id: str,
    judge: Judge | None,
    progress: Callable[[str, int], object] | None = None,
) -> Results:
    """Every system on every scenario.

    `progress(label, total)` returns a bar with `update()` and `close()`; it
    counts chat turns (statements and probes).
    """
    results = Results()
    for dataset in datasets:
        turns = sum(len(s.statements) + 2 * len(s.questions) for s in dataset.scenarios)
        for system in systems:
            bar = progress(f"{dataset.name} {system.name}", turns) if progress else None
            for scenario in dataset.scenarios:
                scenario_run(
                    system=system,
                    dataset=dataset.name,
                    scenario=scenario,
                    run_id=run_id,
                    judge=judge,
                    results=results,
                    tick=functools.partial(bar.update, 1) if bar is not None else tick_none,
                )
            if bar is not None:
                bar.close()
    return results
