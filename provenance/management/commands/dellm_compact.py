from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from provenance.erasure.eraser import compact


class Command(BaseCommand):
    help = (
        "Rewrite (VACUUM FULL) the owners' part of every text table: their hash partitions where a table is "
        "partitioned by owner_id, the whole table where it is not. Removes the bytes of purged rows that VACUUM "
        "leaves in page free space; each relation is locked (ACCESS EXCLUSIVE) while it is rewritten."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--owner", type=int, action="append", required=True, help="A user id whose rows to compact (repeatable)."
        )

    def handle(self, *args: Any, owner: list[int], **options: Any) -> None:
        tables = compact(owner_ids=owner)
        self.stdout.write(self.style.SUCCESS(f"Compacted {', '.join(tables)}."))
