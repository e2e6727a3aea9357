from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models


class ContextEdge(models.Model):
    """`source -> target`: `source` was in the context that produced `target`."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    # No single-column indexes on the ends: the unique (source, target) serves
    # lookups by source and `edge_target` those by target. A whole-history
    # context writes hundreds of edges per reply, each paying for every index.
    source = models.ForeignKey("chat.Message", on_delete=models.CASCADE, related_name="out_edges", db_index=False)
    target = models.ForeignKey("chat.Message", on_delete=models.CASCADE, related_name="in_edges", db_index=False)
    # 0 for the user message the reply answers, then 1..k by retrieval order.
    rank = models.PositiveSmallIntegerField()
    score = models.FloatField(help_text="Cosine similarity at retrieval time (1.0 for the user message).")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["source", "target"], name="edge_source_target_unique"),
            models.CheckConstraint(condition=~models.Q(source=models.F("target")), name="edge_not_self"),
        ]
        indexes = [models.Index(fields=["target"], name="edge_target")]

    def __str__(self) -> str:
        return f"{self.source_id} -> {self.target_id}"


class DeletionRequest(models.Model):
    """One deletion, from preview to outcome. Holds ids and counts, never text."""

    class Selector(models.TextChoices):
        IDS = "ids"
        EXACT = "exact"
        SEMANTIC = "semantic"
        REQUEST = "request"

    class Mode(models.TextChoices):
        SOFT = "soft"
        PURGE = "purge"
        EXPIRE = "expire"

    class Status(models.TextChoices):
        PREVIEWED = "previewed"
        SCHEDULED = "scheduled"
        EXECUTED = "executed"
        CANCELLED = "cancelled"
        UNDONE = "undone"
        # Executed, but the receipt's checks failed: see `receipt`.
        VERIFICATION_FAILED = "verification_failed"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="deletions")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        related_name="+",
        help_text="Who asked: the owner, or staff acting on a data-subject request.",
    )
    confirmed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    selector = models.CharField(max_length=16, choices=Selector.choices)
    # The selector kind that a natural-language request resolved to.
    resolved_selector = models.CharField(max_length=16, choices=Selector.choices, blank=True, default="")
    threshold = models.FloatField(null=True, blank=True)
    mode = models.CharField(max_length=16, choices=Mode.choices)
    depth = models.PositiveIntegerField(null=True, blank=True, help_text="Taint level limit; null = full Dep.")
    expire_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=24, choices=Status.choices, default=Status.PREVIEWED)
    matched_ids = ArrayField(models.BigIntegerField(), default=list)
    dependent_ids = ArrayField(models.BigIntegerField(), default=list)
    deleted_ids = ArrayField(models.BigIntegerField(), default=list)
    # {dependent id: [root id, ..., dependent id]}, ids only.
    explanations = models.JSONField(default=dict)
    outcome = models.TextField(blank=True, default="", help_text="What happened, in ids and counts.")
    created_at = models.DateTimeField(auto_now_add=True)
    confirmed_at = models.DateTimeField(null=True, blank=True)
    executed_at = models.DateTimeField(null=True, blank=True)
    undone_at = models.DateTimeField(null=True, blank=True)
    # The deletion receipt: what the checks run right after execution found,
    # in ids and counts (provenance/verification.py). Null until executed.
    receipt = models.JSONField(null=True, blank=True)
    verified_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        permissions = [("run_subject_deletion", "Can run a deletion on a user's behalf (data-subject request)")]
        indexes = [
            models.Index(fields=["owner", "-created_at"], name="deletion_owner_recent"),
            models.Index(fields=["status", "expire_at"], name="deletion_due"),
        ]

    def __str__(self) -> str:
        return f"Deletion {self.pk} ({self.mode}, {self.status})"

    @property
    def matched_count(self) -> int:
        return len(self.matched_ids)

    @property
    def dependent_count(self) -> int:
        return len(self.dependent_ids)

    @property
    def total(self) -> int:
        return len(self.matched_ids) + len(self.dependent_ids)

    @property
    def on_behalf(self) -> bool:
        """Run by someone other than the owner: staff acting on a data-subject request."""
        return self.actor_id is not None and self.actor_id != self.owner_id
