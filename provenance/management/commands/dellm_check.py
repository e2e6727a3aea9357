from django.core.management.base import BaseCommand, CommandError

from provenance.selectors import taint_violations


class Command(BaseCommand):
    help = "Verify invariant I1 for every owner: no live message has a removed ancestor."

    def add_arguments(self, parser):
        parser.add_argument("--owner", type=int, help="Check one owner (user id) only.")

    def handle(self, *args, owner=None, **options):
        violations = taint_violations(owner_id=owner)
        if not violations:
            self.stdout.write(self.style.SUCCESS("I1 holds: no live message has a removed ancestor."))
            return
        for owner_id, message_id, parent_id in violations:
            self.stderr.write(f"owner {owner_id}: message {message_id} is live but was generated from {parent_id}")
        raise CommandError(f"I1 violated by {len({v[1] for v in violations})} messages.")
