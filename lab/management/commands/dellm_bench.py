import json
import logging
import os
import platform
import random
import time
import uuid
from pathlib import Path

import numpy as np
from django.core.management.base import BaseCommand, CommandError

from chat.index.vectors import MIN_MESSAGES
from dellm_site.celery import app as celery_app
from lab.bench.ctxindex import ctxindex_bench
from lab.bench.erasure_partitions import erasure_partition_bench
from lab.bench.facts import facts_bench
from lab.bench.import_memory import import_memory_bench
from lab.bench.import_taint import import_taint_bench
from lab.bench.imports import import_bench
from lab.bench.live import graph_page_bench, graph_page_missing, throughput_bench
from lab.bench.load import burst_bench, soak_bench, streams_bench
from lab.bench.measure import (
    bench_users,
    dep_bench,
    nearest_user,
    purge_bench,
    retrieval_bench,
    turn_bench,
    vectors_kind,
)
from lab.bench.redaction import redaction_bench
from lab.bench.report import report_write
from lab.bench.thread_page import thread_page_bench
from lab.bench.vector_index import vector_index_bench

PARTS = (
    "dep",
    "retrieval",
    "turn",
    "purge",
    "throughput",
    "graph",
    "streams",
    "soak",
    "burst",
    "import",
    "import_taint",
    "thread_page",
    "redaction",
    "import_memory",
    "vector_index",
    "erase_partition",
    "ctxindex",
    "facts",
)
# Parts that bring their own data: throwaway users (lab/bench/load.py,
# lab/bench/redaction.py) or a generated
# export (lab/bench/imports.py, lab/bench/import_memory.py); no `dellm_seed` needed.
SELF_CONTAINED = {
    "streams",
    "soak",
    "burst",
    "import",
    "import_taint",
    "thread_page",
    "redaction",
    "import_memory",
    "vector_index",
    "erase_partition",
    "ctxindex",
    "facts",
}
# One INFO line (ids only) per turn or deletion; thousands per run.
QUIET_LOGGERS = ("chat.turns", "provenance.deletions", "provenance.erasure", "provenance.regeneration")


class Command(BaseCommand):
    help = (
        "Measure DeLLM at scale on the users `manage.py dellm_seed` made: Dep(m), retrieval, turn overhead, purge, "
        "HTTP + Celery throughput, the graph page. Writes REPORT.md, README_SECTION.md, results.json and PNGs."
    )

    def add_arguments(self, parser):
        parser.add_argument("--out", default="bench-results", help="Output directory (default bench-results/).")
        parser.add_argument("--parts", default=",".join(PARTS), help=f"Comma-separated subset of {','.join(PARTS)}.")
        parser.add_argument("--samples", type=int, default=30, help="Dep(m) samples per |Dep| bucket.")
        parser.add_argument("--queries", type=int, default=60, help="Retrieval queries per user size.")
        parser.add_argument("--retrieval-sizes", default="1000,10000,100000", help="History sizes searched.")
        parser.add_argument(
            "--index-min-messages",
            type=int,
            default=MIN_MESSAGES,
            help="Owners this big get the per-owner IVFFlat index (as `manage.py dellm_vector_indexes`).",
        )
        parser.add_argument("--turns", type=int, default=100, help="Turns for the overhead measurement.")
        parser.add_argument("--purges", type=int, default=2, help="Purges per size (each spends one bench user).")
        parser.add_argument("--purge-sizes", default="1000,10000", help="|Dep| of the purges (comma-separated).")
        parser.add_argument("--clients", type=int, default=4, help="Concurrent HTTP clients.")
        parser.add_argument("--seconds", type=float, default=30.0, help="Throughput run length (bounded).")
        parser.add_argument("--max-turns", type=int, default=400, help="Throughput turn budget (bounded).")
        parser.add_argument("--page-loads", type=int, default=5, help="Graph page loads.")
        parser.add_argument("--only", default="", help="Same as --parts (e.g. --only streams,soak).")
        parser.add_argument("--streams", type=int, default=1000, help="Concurrent SSE streams on one web process.")
        parser.add_argument("--stream-users", type=int, default=50, help="Users the streams are spread over.")
        parser.add_argument("--stream-pool", type=int, default=10, help="Database pool of the streams' web process.")
        parser.add_argument("--soak-users", type=int, default=50, help="Concurrent users in the soak.")
        parser.add_argument("--soak-streams", type=int, default=100, help="Turn streams the soak holds open.")
        parser.add_argument("--soak-seconds", type=float, default=600.0, help="How long the soak's users keep going.")
        parser.add_argument(
            "--soak-warm-up",
            type=float,
            default=None,
            help="Seconds before memory slopes count (default: a fifth of the run, at most 120).",
        )
        parser.add_argument(
            "--soak-env",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="A setting for the soak's web, worker and beat (repeatable), e.g. a quota a heavy user would hit.",
        )
        parser.add_argument(
            "--taint-messages", type=int, default=100_000, help="import_taint: new messages chained onto a deleted one."
        )
        parser.add_argument(
            "--import-messages", type=int, default=10_000, help="Messages in the import part's ChatGPT export."
        )
        parser.add_argument(
            "--import-edge-lengths",
            default="100,500,2000",
            help="Conversation lengths whose conservative provenance edges are timed (comma-separated).",
        )
        parser.add_argument(
            "--redaction-messages", type=int, default=50, help="Matched messages in the redaction part's preview."
        )
        parser.add_argument("--redaction-chars", type=int, default=20_000, help="Characters of each, and of the query.")
        parser.add_argument(
            "--import-memory-mb", type=int, default=100, help="MB of JSON in the import_memory part's accepted export."
        )
        parser.add_argument(
            "--import-memory-refused-mb", type=int, default=200, help="MB of JSON in the export that must be refused."
        )
        parser.add_argument(
            "--import-memory-conversations", type=int, default=1_000, help="Conversations (of 10 messages) in those."
        )
        parser.add_argument(
            "--import-memory-long-messages",
            type=int,
            default=None,
            help="Messages of long real text in the import_memory part's second export "
            "(default DELLM_IMPORT_MAX_MESSAGES; 0: none), as long as DELLM_IMPORT_MAX_UNZIPPED_BYTES allows.",
        )
        parser.add_argument(
            "--import-memory-long-conversations",
            type=int,
            default=1_000,
            help="Conversations those messages are spread over.",
        )
        parser.add_argument(
            "--vector-index-sizes",
            default="2000,10000,30000",
            help="vector_index: history sizes (WordLlama vectors of a realistic corpus) searched exactly and by index.",
        )
        parser.add_argument(
            "--erase-messages", type=int, default=5_000_000, help="erase_partition: rows of its messages-like table."
        )
        parser.add_argument("--erase-users", type=int, default=1_000, help="erase_partition: owners they belong to.")
        parser.add_argument("--erase-partitions", type=int, default=16, help="erase_partition: hash partitions.")
        parser.add_argument(
            "--facts-messages",
            type=int,
            default=20_000,
            help="facts: messages of the imported history (half of them statements: one fact each).",
        )
        parser.add_argument(
            "--ctxindex-neighbours",
            type=int,
            default=10_000,
            help="ctxindex: messages purged at once, each in the index of the turn after it.",
        )
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--command-line", default="", help="How this run was started, for the report.")

    def handle(self, *args, **options):
        parts = [p.strip() for p in (options["only"] or options["parts"]).split(",") if p.strip()]
        unknown = set(parts) - set(PARTS)
        if unknown:
            raise CommandError(f"Unknown part(s) {', '.join(sorted(unknown))}; choose from {', '.join(PARTS)}.")
        if "graph" in parts and (missing := graph_page_missing()):
            raise CommandError(
                f"The graph part cannot run: {missing}. `make bench` installs both; or leave it out with --parts."
            )
        users = bench_users()
        if not users and set(parts) - SELF_CONTAINED:
            raise CommandError("No bench users: run `manage.py dellm_seed` first.")
        started = time.monotonic()
        rng = random.Random(options["seed"])
        nprng = np.random.default_rng(options["seed"])
        results = {}
        quiet = {name: logging.getLogger(name).level for name in QUIET_LOGGERS}
        queue = celery_app.conf.task_default_queue
        try:
            for name in QUIET_LOGGERS:
                logging.getLogger(name).setLevel(logging.WARNING)
            # A purge enqueues a VACUUM after commit: send it to a queue nobody
            # serves (and delete it at the end) so no worker elsewhere picks it up;
            # the purge part vacuums in-line afterwards, outside the timings.
            celery_app.conf.task_default_queue = f"dellm-bench-{uuid.uuid4().hex[:8]}"
            for part in parts:
                self.stdout.write(f"  {part}...")
                part_started = time.monotonic()
                results[part] = self._run(part, users, options, rng, nprng)
                users = bench_users()
                self.stdout.write(f"  {part}: {time.monotonic() - part_started:.0f} s")
        finally:
            with celery_app.connection_for_write() as conn:
                conn.default_channel.queue_delete(celery_app.conf.task_default_queue)
            celery_app.conf.task_default_queue = queue
            for name, level in quiet.items():
                logging.getLogger(name).setLevel(level)
        total = sum(size for _, size in users)
        meta = {
            "command": options["command_line"] or "manage.py dellm_bench",
            "data": f"{len(users)} bench users, {total:,} live messages (largest {users[-1][1]:,})"
            if users
            else "throwaway users and generated data only",
            "vectors": vectors_kind(users[-1][0]) if users else "offline embedder",
            "machine": f"{os.cpu_count()} CPUs, {platform.machine()}, Python {platform.python_version()}",
            "seconds": time.monotonic() - started,
        }
        out = Path(options["out"])
        # The raw numbers first, so a failure while drawing the report loses no measurement.
        out.mkdir(parents=True, exist_ok=True)
        (out / "raw.json").write_text(json.dumps({"meta": meta, "results": results}), encoding="utf-8")
        paths = report_write(out=out, meta=meta, results=results)
        self.stdout.write(self.style.SUCCESS(f"Wrote {', '.join(str(p) for p in paths.values())}"))

    @staticmethod
    def _run(part, users, options, rng, nprng) -> dict:
        if part == "streams":
            return streams_bench(streams=options["streams"], users=options["stream_users"], pool=options["stream_pool"])
        if part == "soak":
            env = {}
            for item in options["soak_env"]:
                name, sep, value = item.partition("=")
                if not sep or not name:
                    raise CommandError(f"--soak-env takes NAME=VALUE, not {item!r}.")
                env[name] = value
            return soak_bench(
                users=options["soak_users"],
                streams=options["soak_streams"],
                seconds=options["soak_seconds"],
                warm_up=options["soak_warm_up"],
                env=env,
                logs=Path(options["out"]) / "soak-logs",
                seed=options["seed"],
            )
        if part == "burst":
            return burst_bench(users=options["soak_users"], logs=Path(options["out"]) / "burst-logs")
        if part == "dep":
            return dep_bench(
                users=users, per_bucket=options["samples"], http_per_bucket=options["samples"] // 2, rng=rng
            )
        if part == "retrieval":
            return retrieval_bench(
                users=users,
                queries=options["queries"],
                seed=options["seed"],
                sizes=[int(size) for size in options["retrieval_sizes"].split(",") if size.strip()],
                index_min=options["index_min_messages"],
            )
        if part == "turn":
            return turn_bench(users=users, turns=options["turns"], rng=nprng)
        if part == "purge":
            sizes = tuple(int(size) for size in options["purge_sizes"].split(",") if size.strip())
            return purge_bench(users=users, targets=sizes, repeats=options["purges"])
        if part == "import":
            lengths = tuple(int(size) for size in options["import_edge_lengths"].split(",") if size.strip())
            return import_bench(messages=options["import_messages"], edge_lengths=lengths, seed=options["seed"])
        if part == "import_taint":
            return import_taint_bench(messages=options["taint_messages"])
        if part == "thread_page":
            return thread_page_bench(requests=options["page_loads"] * 6, seed=options["seed"])
        if part == "redaction":
            return redaction_bench(
                messages=options["redaction_messages"], chars=options["redaction_chars"], seed=options["seed"]
            )
        if part == "ctxindex":
            return ctxindex_bench(neighbours=options["ctxindex_neighbours"])
        if part == "facts":
            return facts_bench(messages=options["facts_messages"], seed=options["seed"])
        if part == "import_memory":
            return import_memory_bench(
                megabytes=options["import_memory_mb"],
                refused_megabytes=options["import_memory_refused_mb"],
                conversations=options["import_memory_conversations"],
                long_messages=options["import_memory_long_messages"],
                long_conversations=options["import_memory_long_conversations"],
            )
        if part == "vector_index":
            sizes = tuple(int(size) for size in options["vector_index_sizes"].split(",") if size.strip())
            return vector_index_bench(sizes=sizes, queries=options["queries"], seed=options["seed"])
        if part == "erase_partition":
            return erasure_partition_bench(
                messages=options["erase_messages"], users=options["erase_users"], partitions=options["erase_partitions"]
            )
        if part == "throughput":
            # Typical users, not the 2,000-message one the graph page shows.
            owners = [owner for owner, size in users if 5_000 <= size <= 20_000] or [users[-1][0]]
            return throughput_bench(
                owners=owners,
                clients=options["clients"],
                seconds=options["seconds"],
                max_turns=options["max_turns"],
                seed=options["seed"],
            )
        user = nearest_user(users, 2_000)
        if user is None:
            return {"error": "no bench user with 1,000-4,000 messages (seed with --extra-users 2000)"}
        result = graph_page_bench(owner_id=user[0], loads=options["page_loads"])
        # 10,000 nodes on the page, the window raised to them.
        large = nearest_user(users, 10_000, exclude={user[0]})
        result["large"] = (
            graph_page_bench(owner_id=large[0], loads=options["page_loads"], window=10_000)
            if large
            else {"error": "no bench user with 5,000-20,000 messages"}
        )
        return result
