from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Create the demo user (demo / demo) if it does not exist; development only (DJANGO_DEBUG=true)."

    def handle(self, *args: Any, **options: Any) -> None:
        # A well-known password on a server that faces the internet is an open door.
        if not settings.DEBUG:
            raise CommandError("The demo user exists only in development (DJANGO_DEBUG=true, as `make run` sets).")
        User = get_user_model()
        if User.objects.filter(username="demo").exists():
            self.stdout.write("demo user already exists")
            return
        User.objects.create_user(username="demo", password="demo")
        self.stdout.write(self.style.SUCCESS("created user demo / demo"))
