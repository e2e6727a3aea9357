from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection, transaction

from chat.models import ContextEdge, Message, Turn
from chat.partitions import PARTITIONED_TABLES, owner_foreign_keys_add, partition_status, partition_table


class Command(BaseCommand):
    help = (
        "Show how the per-owner tables are partitioned by owner (--status, the default), or convert the ones "
        "that are not (--convert: an installation whose migration chat 0015 / 0017 / provenance 0004 was faked), "
        "printing the copy's progress. docs/DEPLOYMENT.md, 'Partitions'."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--status", action="store_true", help="Each table: partitioned or not, its partitions.")
        parser.add_argument("--convert", action="store_true", help="Partition the tables that are not, now.")
        parser.add_argument(
            "--partitions",
            type=int,
            default=settings.DELLM_PARTITIONS,
            help=f"Partitions per table for --convert (default DELLM_PARTITIONS, {settings.DELLM_PARTITIONS}).",
        )
        parser.add_argument("--batch", type=int, default=10_000, help="Rows copied per statement (default 10,000).")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["convert"]:
            if options["partitions"] < 1 or options["batch"] < 1:
                raise CommandError("--partitions and --batch must be at least 1.")
            # One transaction: the tables are locked for the copy, and a failure leaves them as they were.
            try:
                with transaction.atomic(), connection.cursor() as cursor:
                    for table in PARTITIONED_TABLES:
                        if not partition_table(
                            cursor,
                            table=table,
                            partitions=options["partitions"],
                            batch=options["batch"],
                            report=self.stdout.write,
                        ):
                            self.stdout.write(f"{table}: already partitioned")
                    owner_foreign_keys_add(cursor, models=[Message, Turn, ContextEdge])
            except ValueError as exc:
                # A unique key without owner_id: the schema is older than migration chat 0015's keys.
                raise CommandError(f"{exc} (run `manage.py migrate` first; nothing was changed)") from None
        for found in partition_status(list(PARTITIONED_TABLES)):
            parts = found["partitions"]
            rows = sum(part["rows"] for part in parts)
            state = (
                f"{len(parts)} hash partitions by owner_id, ~{rows} rows" if found["partitioned"] else "not partitioned"
            )
            self.stdout.write(f"{found['table']}: {state}")
