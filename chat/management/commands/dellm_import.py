"""`manage.py dellm_import --user NAME FILE [--format F]`: import a chat history with a progress bar."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from chat.imports.formats import FORMATS
from chat.imports.history import ImportProgress, history_import, history_parse
from core.errors import DomainError


class Command(BaseCommand):
    help = (
        "Import a chat history for a user: ChatGPT's export zip or conversations.json, Claude's "
        "conversations.json, DeLLM's export, or JSONL. Importing the same file again adds nothing."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--user", required=True, help="Username of the account that gets the history.")
        parser.add_argument("--format", choices=FORMATS, help="Skip detection.")
        parser.add_argument("--no-progress", action="store_true", help="No progress bar (logs, CI).")

    def handle(self, *args: Any, file: Path, user: str, format: str | None, no_progress: bool, **options: Any) -> None:
        owner = get_user_model().objects.filter(username=user).first()
        if owner is None:
            raise CommandError(f"No user named {user!r}.")
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise CommandError(f"Cannot read {file}: {exc.strerror}.") from None
        try:
            parsed = history_parse(data=data, format=format, outline=True)
        except DomainError as exc:
            raise CommandError(exc.message) from None
        bar = tqdm(
            total=parsed.message_count,
            unit="msg",
            desc=f"{parsed.format} import",
            disable=no_progress,
            file=sys.stderr,
        )

        def advance(progress: ImportProgress) -> None:
            bar.update(progress.messages_done - bar.n)
            bar.set_postfix(conversations=f"{progress.conversations_done}/{progress.conversations_total}")

        try:
            progress = history_import(owner_id=owner.pk, parsed=parsed, on_progress=advance)
        finally:
            bar.close()
        for error in progress.errors:
            self.stderr.write(
                f"not imported: conversation {error['conversation']}: {error['field']} {error['message']}"
            )
        self.stdout.write(
            f"{parsed.format}: {progress.conversations_total - progress.conversations_failed} conversations, "
            f"{progress.messages_imported} messages imported, {progress.messages_skipped} skipped, "
            f"{progress.edges_created} provenance edges; {progress.conversations_failed} conversations not imported."
        )
        if progress.conversations_failed:
            raise CommandError(f"{progress.conversations_failed} conversations were not imported (see above).")
