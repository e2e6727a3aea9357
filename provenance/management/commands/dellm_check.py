from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from provenance.dependents import cross_owner_edges, taint_violations


class Command(BaseCommand):
    help = (
        "Verify invariant I1 for every owner (no live message has a removed ancestor) "
        "and that no provenance edge joins two owners' messages."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--owner", type=int, help="Check I1 for one owner (user id) only.")

    def handle(self, *args: Any, owner: int | None = None, **options: Any) -> None:
        problems = []
        violations = taint_violations(owner_id=owner)
        for owner_id, message_id, parent_id in violations:
            self.stderr.write(f"owner {owner_id}: message {message_id} is live but was generated from {parent_id}")
        if violations:
            problems.append(f"I1 violated by {len({v[1] for v in violations})} messages")
        else:
            self.stdout.write(self.style.SUCCESS("I1 holds: no live message has a removed ancestor."))
        crossing = cross_owner_edges()
        for edge_id, source_id, target_id in crossing:
            self.stderr.write(f"edge {edge_id}: {source_id} -> {target_id} joins messages of different owners")
        if crossing:
            problems.append(f"edges crossing owners: {len(crossing)}")
        else:
            self.stdout.write(self.style.SUCCESS("No edge crosses owners."))
        if problems:
            raise CommandError("; ".join(problems) + ".")
