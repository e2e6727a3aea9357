from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from chat.vector_indexes import MIN_MESSAGES, owner_vector_index_sync


class Command(BaseCommand):
    help = (
        "Create, rebuild or drop the per-owner IVFFlat indexes that keep context retrieval fast for heavy histories "
        "(chat/vector_indexes.py). Safe to run while the app serves chats."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--min-messages",
            type=int,
            default=MIN_MESSAGES,
            help=f"Owners with at least this many embedded messages get an index (default {MIN_MESSAGES}).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        done = owner_vector_index_sync(min_messages=options["min_messages"])
        self.stdout.write(", ".join(f"{kind} {len(ids)} {ids}" for kind, ids in done.items()))
