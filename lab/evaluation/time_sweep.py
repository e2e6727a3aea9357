"""The sweep behind the time re-ranking's constants (docs/RETRIEVAL.md, "Time"): CM recall per kind.

Run: `DELLM_LAB=1 manage.py shell -c "from lab.evaluation.time_sweep import main; main()"`.
Each setting runs `dellm_eval --datasets cm` once with one constant of
`chat.retrieval.time_rank` changed (TIME_POOL also in `chat.retrieval.fused`),
and prints recall@1 / recall@5 / MRR of the
`relevant` policy per question kind.
"""

import json
import tempfile
from io import StringIO

from django.core.management import call_command

from chat.retrieval import fused, time_rank
from lab.evaluation.memory_run import summarize

GRID: list[dict[str, float]] = [
    {},
    *({"PERIOD_BOOST": v} for v in (0.0, 0.5, 1.0, 4.0)),
    *({"WHEN_BOOST": v} for v in (0.0, 1.0)),
    *({"RECENCY_BOOST": v} for v in (0.0, 0.25, 2.0)),
    *({"TIME_POOL": v} for v in (10, 40)),
]
KINDS = ("anchored", "paraphrase", "indirect", "updated", "temporal")


def _row(records: list[dict]) -> str:
    rows = summarize([r for r in records if r["policy"] == "relevant"], lambda r: (r["kind"],))
    by_kind = {row["group"][0]: row for row in rows}
    return " | ".join(
        f"{kind} {by_kind[kind]['recall@1']:.3f}/{by_kind[kind]['recall@5']:.3f}/{by_kind[kind]['mrr']:.3f}"
        for kind in KINDS
    )


def _set(name: str, value: float) -> None:
    for module in (time_rank, fused):
        if hasattr(module, name):
            setattr(module, name, value)


def main() -> None:
    defaults = {name: getattr(time_rank, name) for name in ("PERIOD_BOOST", "WHEN_BOOST", "RECENCY_BOOST", "TIME_POOL")}
    try:
        for change in GRID:
            for name, value in {**defaults, **change}.items():
                _set(name, value)
            with tempfile.TemporaryDirectory() as out:
                call_command(
                    "dellm_eval", datasets="cm", cm_tofu_questions=0, out=out, no_progress=True, stdout=StringIO()
                )
                with open(f"{out}/results.json") as results:
                    records = json.load(results)["memory"]
            print(change or "defaults", _row(records), flush=True)
    finally:
        for name, value in defaults.items():
            _set(name, value)
