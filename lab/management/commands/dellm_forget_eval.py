import logging
import time
from pathlib import Path

from django.core.management.base import BaseCommand
from tqdm import tqdm

from dellm_site.celery import app as celery_app
from lab.evaluation.forget_cases import PER_CATEGORY, forget_cases
from lab.evaluation.forget_run import forget_evaluate, forget_report_write, forget_summary
from lab.evaluation.systems import run_id_new
from lab.management.commands.dellm_eval import QUIET_LOGGERS


class Command(BaseCommand):
    help = (
        "DeLLM's own adversarial set of forget and update requests, through the natural-language door, scored by "
        "what retrieval still reaches; writes forget-requests.md and forget-requests.json."
    )

    def add_arguments(self, parser):
        parser.add_argument("--out", default="eval-results", help="Output directory (default eval-results/).")
        parser.add_argument("--per-category", type=int, default=PER_CATEGORY, help="Cases of each category.")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, **options):
        started = time.monotonic()
        cases = forget_cases(seed=options["seed"], per_category=options["per_category"])
        quiet = {name: logging.getLogger(name).level for name in QUIET_LOGGERS}
        eager = celery_app.conf.task_always_eager
        bar = None if options["no_progress"] else tqdm(total=len(cases), desc="forget", unit="case", leave=False)
        try:
            for name in QUIET_LOGGERS:
                logging.getLogger(name).setLevel(logging.WARNING)
            # A deletion's follow-ups (re-derivation, vacuum) run in-process: no worker, nothing left queued.
            celery_app.conf.task_always_eager = True
            records = forget_evaluate(cases, run_id=run_id_new(), tick=(lambda: bar.update(1)) if bar else lambda: None)
        finally:
            celery_app.conf.task_always_eager = eager
            for name, level in quiet.items():
                logging.getLogger(name).setLevel(level)
            if bar is not None:
                bar.close()
        meta = {
            "command": f"manage.py dellm_forget_eval --per-category {options['per_category']} --seed {options['seed']}",
            "cases": len(cases),
            "seed": options["seed"],
            "seconds": time.monotonic() - started,
        }
        paths = forget_report_write(out=Path(options["out"]), meta=meta, records=records)
        for row in forget_summary(records):
            self.stdout.write(
                f"{row['category']}: {row['passed']:.2f} passed of {row['cases']} "
                f"(forgotten {row['forgotten']:.2f}, kept {row['kept']:.2f}, not read {row['not_a_request']})"
            )
        self.stdout.write(f"Wrote {', '.join(str(p) for p in paths.values())} in {meta['seconds']:.0f} s.")
