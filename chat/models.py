from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from pgvector.django import VectorField


class Thread(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="threads")
    title = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at", "-id"]
        indexes = [models.Index(fields=["owner", "-updated_at"], name="thread_owner_recent")]

    def __str__(self) -> str:
        return f"Thread {self.pk}"


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        SUMMARY = "summary"

    class Status(models.TextChoices):
        ACTIVE = "active"
        DELETED = "deleted"
        PURGED = "purged"
        EXPIRING = "expiring"

    # Statuses that take part in contexts and the visible history. An
    # `expiring` message is still live until its scheduled deletion fires.
    LIVE = (Status.ACTIVE, Status.EXPIRING)

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="messages")
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="messages")
    seq = models.PositiveBigIntegerField(help_text="Per-owner sequence number (the paper's message id).")
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    embedding = VectorField(dimensions=settings.DELLM_EMBEDDING_DIM, null=True, blank=True)
    embedding_model = models.CharField(max_length=100, blank=True, default="")
    search = models.GeneratedField(
        expression=SearchVector("content", config="english"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    deleted_by = models.ForeignKey(
        "provenance.DeletionRequest",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="removed_messages",
    )
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["seq"]
        constraints = [models.UniqueConstraint(fields=["owner", "seq"], name="message_owner_seq_unique")]
        indexes = [
            models.Index(fields=["owner", "status", "seq"], name="message_owner_status_seq"),
            models.Index(fields=["thread", "seq"], name="message_thread_seq"),
            GinIndex(fields=["search"], name="message_search_gin"),
        ]

    def __str__(self) -> str:
        return f"Message #{self.seq} ({self.role}, {self.status})"

    @property
    def is_live(self) -> bool:
        return self.status in self.LIVE


class Turn(models.Model):
    """One request for a reply: the user's message and, once done, the reply."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="turns")
    user_message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="turns")
    reply = models.ForeignKey(Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    error = models.TextField(blank=True, default="", help_text="For humans; never message text.")
    attempts = models.PositiveIntegerField(default=0)
    policy = models.CharField(max_length=16, default="relevant")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "status"], name="turn_owner_status")]

    def __str__(self) -> str:
        return f"Turn {self.pk} ({self.status})"
