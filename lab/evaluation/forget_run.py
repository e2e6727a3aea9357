"""The forget-request set (lab/evaluation/forget_cases.py) run through DeLLM's natural-language door, scored by
what retrieval can still reach.

Each case gets a throwaway user (`eval-`): its statements are chat turns with
facts drawn, as the product runs; the request goes the way the chat and
`POST /api/deletions/ {"request"}` send it (`resolve_deletion_request`, a soft
preview, confirmed as shown, its redactions as proposed); then the top 5 of
the turn's retrieval (`memory_search`) is read for each forget span (asked by
the statement that held it, by the span's own words, and by the case's
question) and each keep span (asked by its own statement). A case passes
when no forget span is reached and every keep span is. A request the door
does not read as one deletes nothing; a keep span lost is collateral loss.
"""

import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chat.retrieval.context import memory_search
from core.errors import NotFound, ValidationFailed
from lab.evaluation.forget_cases import CATEGORIES, ForgetCase
from lab.evaluation.systems import EvalOwner, system_parse
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.forget_phrases import TYPED_REQUEST_MODE, resolve_deletion_request
from provenance.deletions.identifiers import normalized
from provenance.deletions.preview import deletion_preview


def held(content: str, span: str) -> bool:
    """Whether `content` holds `span` (a number: its digits in order, however separated)."""
    if span.isdigit():
        return span in "".join(ch for ch in normalized(content) if ch.isdigit())
    return normalized(span).casefold() in normalized(content).casefold()


def _reached(owner: EvalOwner, query: str) -> list[str]:
    return [message.content for _, message in memory_search(owner_id=owner.user.pk, text=query, k=5)]


def case_run(case: ForgetCase, *, run_id: str) -> dict[str, Any]:
    """One case, start to end; its record."""
    owner = EvalOwner(system=system_parse("dellm:facts"), run_id=run_id, scenario_key=case.key)
    try:
        for statement in case.statements:
            owner.say(statement)
        resolved = ""
        try:
            selection = resolve_deletion_request(owner=owner.user, text=case.request)
            preview = deletion_preview(
                owner=owner.user, actor=owner.user, mode=TYPED_REQUEST_MODE, selector="request", **selection
            )
            resolved = preview.resolved_selector
            proposed = {str(p["message"]): p["text"] for p in preview.redaction_proposals}
            deletion_confirm(
                deletion_id=preview.pk, owner_id=owner.user.pk, confirmed_by=owner.user, redactions=proposed or None
            )
        except (ValidationFailed, NotFound):
            resolved = "not a request"
        by_span = {span: next((s for s in case.statements if held(s, span)), span) for span in case.forget}
        leaked = [
            span
            for span, statement in by_span.items()
            if any(
                held(content, span) for query in (statement, span, case.question) for content in _reached(owner, query)
            )
        ]
        lost = [
            span
            for span in case.keep
            if not any(
                held(content, span)
                for content in _reached(owner, next((s for s in case.statements if held(s, span)), span))
            )
        ]
        return {
            "case": case.key,
            "category": case.category,
            "request": case.request,
            "resolved": resolved,
            "leaked": leaked,
            "lost": lost,
            "passed": not leaked and not lost,
        }
    finally:
        owner.close()


def forget_evaluate(
    cases: list[ForgetCase], *, run_id: str, tick: Callable[[], None] = lambda: None
) -> list[dict[str, Any]]:
    records = []
    for case in cases:
        records.append(case_run(case, run_id=run_id))
        tick()
    return records


def forget_summary(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per category (then all): cases, passed, forgotten (nothing leaked), kept (nothing lost), not read."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        groups[record["category"]].append(record)
    rows = []
    for name in [*(c for c in CATEGORIES if c in groups), "all"]:
        group = records if name == "all" else groups[name]
        count = len(group)
        rows.append(
            {
                "category": name,
                "cases": count,
                "passed": sum(r["passed"] for r in group) / count,
                "forgotten": sum(not r["leaked"] for r in group) / count,
                "kept": sum(not r["lost"] for r in group) / count,
                "not_a_request": sum(r["resolved"] == "not a request" for r in group),
            }
        )
    return rows


def forget_report_write(*, out: Path, meta: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    rows = forget_summary(records)
    paths = {"json": out / "forget-requests.json", "md": out / "forget-requests.md"}
    paths["json"].write_text(json.dumps({"meta": meta, "summary": rows, "records": records}, indent=2) + "\n")
    lines = [
        "# Forget requests: DeLLM's own adversarial set",
        "",
        f"`{meta['command']}` · {meta['cases']} cases · seed {meta['seed']} · {meta['seconds']:.0f} s",
        "",
        "A case passes when, after the request is confirmed as previewed, the top 5 of retrieval reaches none of "
        "what was to be forgotten (asked by its statement, its own words and the case's question) and all of what "
        "was to be kept (asked by its statement). `kept` below 1 is collateral loss.",
        "",
        "| category | cases | passed | forgotten | kept | not read as a request |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['category']} | {r['cases']} | {r['passed']:.2f} | {r['forgotten']:.2f} | {r['kept']:.2f} "
        f"| {r['not_a_request']} |"
        for r in rows
    ]
    failing = [r for r in records if not r["passed"]][:40]
    if failing:
        lines += [
            "",
            "## Failing cases (first 40)",
            "",
            "| case | request | resolved as | leaked | lost |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['case']} | {r['request']} | {r['resolved']} | {', '.join(r['leaked'])} | {', '.join(r['lost'])} |"
            for r in failing
        ]
    paths["md"].write_text("\n".join(lines) + "\n")
    return paths
