from django.core.management.base import BaseCommand, CommandError

from lab.bench.seed import USERNAME_PREFIX, bench_reset, bench_seed


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise CommandError(f"--extra-users takes comma-separated message counts, not {text!r}") from exc
    if any(size < 0 for size in sizes):
        raise CommandError("--extra-users sizes must be >= 0")
    return sizes


class Command(BaseCommand):
    help = (
        f"Bulk-load synthetic histories (COPY) into dedicated {USERNAME_PREFIX}<i> users for `manage.py dellm_bench`. "
        "Holds the message and edge tables' locks while loading: use a bench database."
    )

    def add_arguments(self, parser):
        parser.add_argument("--users", type=int, default=100, help="Users sharing --messages equally (default 100).")
        parser.add_argument("--messages", type=int, default=1_000_000, help="Messages across --users.")
        parser.add_argument(
            "--extra-users",
            default="",
            help="Comma-separated message counts of further users (e.g. 1000,100000 for retrieval at those sizes).",
        )
        parser.add_argument(
            "--random-vectors",
            action="store_true",
            help="Random unit vectors instead of the offline embedder (faster; recorded as such).",
        )
        parser.add_argument("--reset", action="store_true", help=f"First remove every {USERNAME_PREFIX}* user.")
        parser.add_argument("--reset-only", action="store_true", help="Remove the bench users and load nothing.")
        parser.add_argument("--seed", type=int, default=0)

    def handle(self, *args, **options):
        if options["reset_only"]:
            self.stdout.write(f"Removed {bench_reset()} bench users.")
            return
        if options["users"] < 1 or options["messages"] < 0:
            raise CommandError("--users must be >= 1 and --messages >= 0")
        result = bench_seed(
            users=options["users"],
            messages=options["messages"],
            extra_sizes=_sizes(options["extra_users"]),
            random_vectors=options["random_vectors"],
            reset=options["reset"],
            seed=options["seed"],
            progress=lambda text: self.stdout.write(f"  {text}"),
        )
        rate = result.messages / result.seconds if result.seconds else 0
        self.stdout.write(
            self.style.SUCCESS(
                f"Seeded {result.users} users, {result.messages:,} messages, {result.edges:,} edges, "
                f"{result.threads:,} threads with {result.vectors} in {result.seconds:.1f} s ({rate:,.0f} messages/s)."
            )
        )
