from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from chat.index.embeddings import get_embedder
from chat.models import Message
from chat.writer.vectors import messages_index_embed


class Command(BaseCommand):
    help = (
        "Re-embed every message that still has content with the configured embedder (its index text: its "
        "words with its context), in batches, while the "
        "application keeps running: retrieval compares a question only with vectors of its own model, so "
        "messages not yet re-embedded are left out of similarity until their batch is done (full-text "
        "retrieval still finds them)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch", type=int, default=256)
        parser.add_argument("--only-stale", action="store_true", help="Skip messages already embedded by this model.")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args: Any, batch: int, only_stale: bool, no_progress: bool, **options: Any) -> None:
        embedder = get_embedder()
        model = settings.DELLM_EMBEDDING_MODEL
        # System prompts are never embedded: they are not memory, so nothing compares with them by meaning.
        queryset = (
            Message.objects.exclude(status=Message.Status.PURGED)
            .exclude(content="")
            .exclude(role=Message.Role.SYSTEM)
            .order_by("pk")
        )
        if only_stale:
            queryset = queryset.exclude(embedding_model=model, embedding__isnull=False)
        total = queryset.count()
        seen = 0
        done = 0
        last_pk = 0
        while True:
            chunk = list(queryset.filter(pk__gt=last_pk).values_list("pk", "owner_id")[:batch])
            if not chunk:
                break
            owned: dict[int, list[int]] = {}
            for pk, owner_id in chunk:
                owned.setdefault(owner_id, []).append(pk)
            # Each message's index text (its words with its context, chat/index/context.py), an owner at a
            # time (its partition); a text the model cannot embed gets no vector (it matches nothing by similarity).
            for owner_id, ids in owned.items():
                done += messages_index_embed(
                    owner_id=owner_id, ids=ids, missing_only=False, embedder=embedder, model=model
                )
            last_pk = chunk[-1][0]
            seen += len(chunk)
            if not no_progress:
                self._progress(seen, total)
        if not no_progress:
            self.stderr.write("")
        self.stdout.write(self.style.SUCCESS(f"Re-embedded {done} messages with {model}."))

    def _progress(self, seen: int, total: int) -> None:
        # A text bar on stderr, redrawn in place (tqdm is a development tool here).
        width = 30
        filled = width * seen // max(total, 1)
        bar = "#" * filled + "-" * (width - filled)
        self.stderr.write(f"\rreembed [{bar}] {seen:,}/{total:,}", ending="")
        self.stderr.flush()
