from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from chat.embeddings import get_embedder
from chat.models import Message


class Command(BaseCommand):
    help = "Re-embed every message that still has content, with the configured embedder."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch", type=int, default=256)
        parser.add_argument("--only-stale", action="store_true", help="Skip messages already embedded by this model.")

    def handle(self, *args: Any, batch: int, only_stale: bool, **options: Any) -> None:
        embedder = get_embedder()
        queryset = Message.objects.exclude(status=Message.Status.PURGED).order_by("pk")
        if only_stale:
            queryset = queryset.exclude(embedding_model=settings.DELLM_EMBEDDING_MODEL, embedding__isnull=False)
        done = 0
        last_pk = 0
        while True:
            chunk = list(queryset.filter(pk__gt=last_pk).only("pk", "content")[:batch])
            if not chunk:
                break
            vectors = embedder.embed([m.content for m in chunk])
            for message, vector in zip(chunk, vectors, strict=True):
                message.embedding = vector
                message.embedding_model = settings.DELLM_EMBEDDING_MODEL
            Message.objects.bulk_update(chunk, ["embedding", "embedding_model"])
            done += len(chunk)
            last_pk = chunk[-1].pk
        self.stdout.write(self.style.SUCCESS(f"Re-embedded {done} messages with {settings.DELLM_EMBEDDING_MODEL}."))
