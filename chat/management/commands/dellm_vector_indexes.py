from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from chat.index.vectors import MAX_PER_RELATION, MIN_MESSAGES, owner_vector_index_sync


class Command(BaseCommand):
    help = (
        "Create, rebuild or drop the per-owner IVFFlat indexes that keep context retrieval fast from mid-size "
        "histories on (chat/index/vectors.py). Safe to run while the app serves chats."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--min-messages",
            type=int,
            default=MIN_MESSAGES,
            help=f"Owners with at least this many embedded messages get an index (default {MIN_MESSAGES}).",
        )
        parser.add_argument(
            "--per-relation",
            type=int,
            default=MAX_PER_RELATION,
            help=f"At most this many indexes on the table or on each partition, the largest histories' "
            f"(default {MAX_PER_RELATION}: each one costs every query on the table planning time).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        done = owner_vector_index_sync(min_messages=options["min_messages"], per_relation=options["per_relation"])
        self.stdout.write(", ".join(f"{kind} {len(ids)} {ids}" for kind, ids in done.items()))
