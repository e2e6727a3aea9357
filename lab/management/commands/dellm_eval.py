import logging
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from chat.llm import get_responder
from dellm_site.celery import app as celery_app
from lab.evaluation.datasets import tofu_load
from lab.evaluation.metrics import judge_get, relations_check, summarize
from lab.evaluation.notes import NOTES
from lab.evaluation.personas import SAMPLE_PATH, pf_generate, pf_mixed_generate, pf_sample_lines
from lab.evaluation.report import report_write
from lab.evaluation.runner import evaluate
from lab.evaluation.systems import DEFAULT_THRESHOLDS, run_id_new, system_parse, systems_default

# The smoke variant runs inside the test suite: 2 personas and a handful of TOFU facts.
SMOKE = {"personas": 2, "forget_per_author": 2, "retain_authors": 2, "retain_per_author": 3, "retain_questions": None}
# Loggers that write one INFO line (ids only) per deletion or eager task; thousands per run.
QUIET_LOGGERS = (
    "chat.services",
    "provenance.services",
    "provenance.tasks",
    "provenance.verification",
    "provenance.regeneration",
    "celery.app.trace",
)


class Command(BaseCommand):
    help = (
        "Reproduce the paper's utility and deletion experiments (TOFU and PF) on the real services, "
        "in throwaway eval- users; writes report.md, thresholds.png and results.json."
    )

    def add_arguments(self, parser):
        parser.add_argument("--out", default="eval-results", help="Output directory (default eval-results/).")
        parser.add_argument("--smoke", action="store_true", help="Tiny run: 2 personas, a handful of TOFU facts.")
        parser.add_argument("--datasets", default="pf,tofu", help="Comma-separated: pf, pf-mixed, tofu.")
        parser.add_argument(
            "--systems",
            default="",
            help="Comma-separated: dellm, dellm:regenerate, dellm:redact, no_memory, full_memory, semantic:<t> "
            "(default all).",
        )
        parser.add_argument(
            "--thresholds",
            default=",".join(f"{t:g}" for t in DEFAULT_THRESHOLDS),
            help="Thresholds of the semantic:<t> systems when --systems is not given.",
        )
        parser.add_argument("--personas", type=int, default=40, help="PF personas (the generator makes any number).")
        parser.add_argument("--tofu-retain-authors", type=int, default=20)
        parser.add_argument(
            "--tofu-retain-questions",
            type=int,
            default=40,
            help="Seeded sample of retain questions asked (all forget questions are always asked); 0 = all.",
        )
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--no-progress", action="store_true")
        parser.add_argument(
            "--write-pf-sample",
            action="store_true",
            help=f"Rewrite the committed PF sample ({SAMPLE_PATH.name}) and exit.",
        )

    def handle(self, *args, **options):
        if options["write_pf_sample"]:
            SAMPLE_PATH.write_text("\n".join(pf_sample_lines()) + "\n", encoding="utf-8")
            self.stdout.write(f"Wrote {SAMPLE_PATH}.")
            return
        started = time.monotonic()
        try:
            systems = self._systems(options)
            datasets = self._datasets(options)
        except (ValueError, OSError) as exc:
            raise CommandError(str(exc)) from exc
        judge = judge_get()
        quiet = {name: logging.getLogger(name).level for name in QUIET_LOGGERS}
        eager = celery_app.conf.task_always_eager
        try:
            for name in QUIET_LOGGERS:
                logging.getLogger(name).setLevel(logging.WARNING)
            # A purge enqueues a VACUUM; run it in-process so the evaluation
            # needs no worker and leaves nothing queued behind it.
            celery_app.conf.task_always_eager = True
            results = evaluate(
                systems=systems,
                datasets=datasets,
                run_id=run_id_new(),
                judge=judge,
                progress=None if options["no_progress"] else self._bar,
            )
        finally:
            celery_app.conf.task_always_eager = eager
            for name, level in quiet.items():
                logging.getLogger(name).setLevel(level)
        rows = summarize(records=results.records, deletions=results.deletions)
        checks = relations_check(rows)
        meta = {
            "command": self._command_line(options),
            "responder": get_responder().name,
            "embedder": settings.DELLM_EMBEDDING_MODEL,
            "judge": judge is not None,
            "datasets": "; ".join(
                f"{d.name}: {len(d.scenarios)} scenario(s), {sum(len(s.statements) for s in d.scenarios)} statements, "
                f"{d.question_count} questions"
                for d in datasets
            ),
            "seconds": time.monotonic() - started,
            "seed": options["seed"],
        }
        paths = report_write(
            out=Path(options["out"]), meta=meta, rows=rows, checks=checks, records=results.records, notes=NOTES
        )
        for check in checks:
            style = self.style.SUCCESS if check["holds"] else self.style.WARNING
            verdict = "holds" if check["holds"] else "does not hold"
            self.stdout.write(style(f"{check['dataset']}: {check['relation']}: {verdict} ({check['detail']})"))
        self.stdout.write(f"Wrote {', '.join(str(p) for p in paths.values())} in {meta['seconds']:.0f} s.")

    @staticmethod
    def _command_line(options) -> str:
        if options["smoke"]:
            return f"manage.py dellm_eval --smoke --datasets {options['datasets']}"
        return (
            f"manage.py dellm_eval --datasets {options['datasets']} --personas {options['personas']} "
            f"--tofu-retain-authors {options['tofu_retain_authors']} "
            f"--tofu-retain-questions {options['tofu_retain_questions']} --seed {options['seed']}"
        )

    @staticmethod
    def _bar(label: str, total: int):
        return tqdm(total=total, desc=label, unit="turn", leave=False, dynamic_ncols=True)

    @staticmethod
    def _systems(options) -> list:
        if options["systems"]:
            return [system_parse(name.strip()) for name in options["systems"].split(",") if name.strip()]
        thresholds = [float(t) for t in options["thresholds"].split(",") if t.strip()]
        return systems_default(thresholds)

    @staticmethod
    def _datasets(options) -> list:
        names = [name.strip() for name in options["datasets"].split(",") if name.strip()]
        unknown = set(names) - {"pf", "pf-mixed", "tofu"}
        if unknown:
            raise ValueError(f"Unknown dataset(s): {', '.join(sorted(unknown))}; use pf, pf-mixed and/or tofu.")
        smoke = options["smoke"]
        datasets = []
        if "pf" in names:
            datasets.append(
                pf_generate(count=SMOKE["personas"] if smoke else options["personas"], seed=options["seed"])
            )
        if "pf-mixed" in names:
            datasets.append(
                pf_mixed_generate(count=SMOKE["personas"] if smoke else options["personas"], seed=options["seed"])
            )
        if "tofu" in names:
            sizes = (
                {k: SMOKE[k] for k in ("forget_per_author", "retain_authors", "retain_per_author", "retain_questions")}
                if smoke
                else {
                    "retain_authors": options["tofu_retain_authors"],
                    "retain_questions": options["tofu_retain_questions"] or None,
                }
            )
            datasets.append(tofu_load(directory=Path(settings.DELLM_TOFU_DIR), seed=options["seed"], **sizes))
        return datasets
