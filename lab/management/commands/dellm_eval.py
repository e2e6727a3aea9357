import json
import logging
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from chat.llm import get_responder
from dellm_site.celery import app as celery_app
from lab.evaluation.datasets import tofu_load
from lab.evaluation.dialogue import dialogues_generate
from lab.evaluation.fact_extraction import extraction_markdown, extraction_quality
from lab.evaluation.memory import conversations_generate, tofu_conversation
from lab.evaluation.memory_run import embedders_available, memory_evaluate, memory_markdown
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
    "chat.turns",
    "provenance.deletions",
    "provenance.erasure",
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
        parser.add_argument(
            "--datasets", default="pf,tofu,cm,dia", help="Comma-separated: pf, pf-mixed, tofu, cm, dia."
        )
        parser.add_argument("--cm-conversations", type=int, default=8, help="CM (conversational memory) conversations.")
        parser.add_argument(
            "--dia-conversations", type=int, default=8, help="DIA (two-speaker dialogue memory) conversations."
        )
        parser.add_argument(
            "--cm-tofu-questions", type=int, default=150, help="TOFU questions in CM's robustness check (0: none)."
        )
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
            run_id = run_id_new()
            results = evaluate(
                systems=systems,
                datasets=datasets,
                run_id=run_id,
                judge=judge,
                progress=None if options["no_progress"] else self._bar,
            )
            memory = self._memory(options, run_id) if {"cm", "dia"} & set(self._names(options)) else None
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
            out=Path(options["out"]),
            meta=meta,
            rows=rows,
            checks=checks,
            records=results.records,
            notes=NOTES,
            memory=memory,
            extraction=self._extraction(options, datasets),
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

    def _memory(self, options, run_id: str) -> dict:
        """The CM section: CM's and DIA's generated conversations, plus TOFU's questions over its answers (with CM)."""
        smoke = options["smoke"]
        names = self._names(options)
        conversations, data = [], {}
        for name, label, generate, option in (
            ("cm", "CM", conversations_generate, "cm_conversations"),
            ("dia", "DIA", dialogues_generate, "dia_conversations"),
        ):
            if name not in names:
                continue
            count = 1 if smoke else options[option]
            generated = generate(seed=options["seed"], count=count)
            conversations += generated
            data[label] = (
                f"{count} generated conversation(s) of {sum(len(s) for s in generated[0].sessions)} messages "
                f"in {len(generated[0].sessions)} sessions, {sum(len(c.questions) for c in generated)} questions"
            )
        tofu_questions = 10 if smoke else options["cm_tofu_questions"]
        tofu_file = Path(settings.DELLM_TOFU_DIR) / "full.jsonl"
        if "cm" in names and tofu_questions and tofu_file.exists():
            rows = [json.loads(line) for line in tofu_file.read_text(encoding="utf-8").splitlines() if line.strip()]
            conversations.append(
                tofu_conversation(rows=rows, authors=30, questions=tofu_questions, seed=options["seed"])
            )
            data["TOFU"] = f"30 authors' 600 answers as one history, {tofu_questions} of their questions"
        bar = None if options["no_progress"] else self._bar("CM", len(conversations))
        records = memory_evaluate(
            conversations=conversations,
            embedders=embedders_available(),
            threshold=settings.DELLM_CONTEXT_THRESHOLD,
            run_id=run_id,
            tick=(lambda: bar.update(1)) if bar is not None else lambda: None,
        )
        if bar is not None:
            bar.close()
        return {"records": records, "markdown": memory_markdown(records=records, datasets=data)}

    def _extraction(self, options, datasets: list) -> dict | None:
        """The offline extractor against the labelled facts of PF and of CM's and DIA's generated conversations."""
        names = self._names(options)
        pf = next((d for d in datasets if d.name == "pf"), None)
        count = 1 if options["smoke"] else None
        conversations = {
            label: generate(seed=options["seed"], count=count or options[option])
            for name, label, generate, option in (
                ("cm", "CM", conversations_generate, "cm_conversations"),
                ("dia", "DIA", dialogues_generate, "dia_conversations"),
            )
            if name in names
        }
        if pf is None and not conversations:
            return None
        rows = extraction_quality(pf=pf, conversations=conversations)
        return {"rows": rows, "markdown": extraction_markdown(rows)}

    @staticmethod
    def _names(options) -> list[str]:
        return [name.strip() for name in options["datasets"].split(",") if name.strip()]

    @classmethod
    def _datasets(cls, options) -> list:
        names = cls._names(options)
        unknown = set(names) - {"pf", "pf-mixed", "tofu", "cm", "dia"}
        if unknown:
            raise ValueError(
                f"Unknown dataset(s): {', '.join(sorted(unknown))}; use pf, pf-mixed, tofu, cm and/or dia."
            )
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
