import json
import logging

from django.core.management.base import BaseCommand, CommandError

from lab.bench.regeneration import regeneration_bench

QUIET_LOGGERS = (
    "chat.turns",
    "provenance.deletions",
    "provenance.regeneration",
)


class Command(BaseCommand):
    help = "Time the deletion of a message with N derived replies, regenerated (offline responder); prints JSON."

    def add_arguments(self, parser):
        parser.add_argument("--replies", type=int, default=100, help="Derived replies to rewrite (default 100).")

    def handle(self, *args, **options):
        if not 1 <= options["replies"] <= 10_000:
            raise CommandError("--replies must be between 1 and 10000.")
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
        self.stdout.write(json.dumps(regeneration_bench(replies=options["replies"]), indent=2))
