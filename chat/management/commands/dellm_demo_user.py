from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the demo user (demo / demo) if it does not exist."

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        if User.objects.filter(username="demo").exists():
            self.stdout.write("demo user already exists")
            return
        User.objects.create_user(username="demo", password="demo")
        self.stdout.write(self.style.SUCCESS("created user demo / demo"))
