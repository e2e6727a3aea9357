from typing import Any

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models

from chat.models import OwnerPartitioned


class DeletionRequest(OwnerPartitioned):
    """One deletion, from preview to outcome. Holds ids and counts, never text.

    The messages it removed carry its id in `chat.Message.deleted_by_id`.
    """

    class Selector(models.TextChoices):
        IDS = "ids"
        EXACT = "exact"
        SEMANTIC = "semantic"
        IDENTIFIER = "identifier"
        WORDS = "words"
        SUBJECT = "subject"
        REQUEST = "request"

    class Mode(models.TextChoices):
        SOFT = "soft"
        PURGE = "purge"
        EXPIRE = "expire"

    class Derived(models.TextChoices):
        """What happens to the replies in Dep(M) \\ M."""

        DELETE = "delete"
        REGENERATE = "regenerate"

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
    derived = models.CharField(max_length=16, choices=Derived.choices, default=Derived.DELETE)
    # Replies that regeneration rewrites (preview: as planned; confirm: recomputed).
    regenerate_ids = ArrayField(models.BigIntegerField(), default=list)
    # {original message id: id of its redacted replacement}, ids only.
    redacted = models.JSONField(default=dict)
    regeneration_cancelled_at = models.DateTimeField(null=True, blank=True)
    regeneration_finished_at = models.DateTimeField(null=True, blank=True)
    # What an undo removed besides restoring `deleted_ids`: the rewrites and their Dep.
    undo_removed_ids = ArrayField(models.BigIntegerField(), default=list)
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
    # in ids and counts (provenance/deletions/receipts.py). Null until executed.
    receipt = models.JSONField(null=True, blank=True)
    verified_at = models.DateTimeField(null=True, blank=True)
    # When the eraser's scrub rebuilt the text indexes of this purge's owner (provenance/erasure). Null until
    # then: the scrub takes every executed purge still null, so one that commits while a scrub runs waits for the next.
    scrubbed_at = models.DateTimeField(null=True, blank=True)
    # A purge's transaction id (PostgreSQL's 64-bit xid8): the row versions it replaced can be removed
    # once every snapshot open anywhere is newer (provenance/erasure/eraser.py). Null for other modes.
    purge_xid = models.BigIntegerField(null=True, blank=True, editable=False)
    # When a vacuum that could remove those row versions ran: from then the purged text is physically gone
    # from heap, TOAST and table indexes (free space aside: docs/SECURITY.md). Null until then.
    erased_at = models.DateTimeField(null=True, blank=True)

    # Set by `provenance.deletions.selectors.imported_dependents_attach`: the imported
    # replies among the dependents.
    imported_dependents: list[int]
    # Set by `provenance.deletions.selectors.removes_attach`: for a preview, how many messages confirming changes now.
    removes: int | None
    # Set by `provenance.deletions.selectors.tool_steps_attach`: [{"id", "kind"}] of the tool steps it removes.
    tool_steps: list[dict[str, object]]
    # Set by `provenance.deletions.selectors.agent_reads_attach`: which of its messages MCP clients read, and when.
    agent_reads: dict[str, Any]
    # Set by `provenance.deletions.facts.facts_attach`: the facts it removes, re-derives and reinstates.
    facts: dict[str, Any]
    # Set by a preview that selects by identifier (provenance/deletions/by_identifier.py), never stored:
    # what was named and the near misses kept.
    resolution: dict[str, Any] | None = None

    class Meta:
        ordering = ["-created_at", "-id"]
        permissions = [("run_subject_deletion", "Can run a deletion on a user's behalf (data-subject request)")]
        indexes = [
            models.Index(fields=["owner", "-created_at"], name="deletion_owner_recent"),
            models.Index(fields=["status", "expire_at"], name="deletion_due"),
            # The scrub's queue: executed purges whose owner's indexes are not rebuilt yet.
            models.Index(
                fields=["owner"],
                name="deletion_unscrubbed",
                condition=models.Q(
                    scrubbed_at__isnull=True,
                    mode__in=["purge", "expire"],
                    status__in=["executed", "verification_failed"],
                ),
            ),
        ]

    # Redacted texts offered by the preview that created this object: set by
    # `deletion_preview`, answered once, never stored (they are message text).
    redaction_proposals: tuple[dict[str, Any], ...] = ()
    # Matched user messages that preview did not scan for a redaction (past its caps).
    redactions_unscanned: tuple[int, ...] = ()
    # Related information outside Dep (ids, kinds, reasons), set by `related_attach` for that response only.
    related: tuple[dict[str, Any], ...] = ()

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


class AccountErasure(models.Model):
    """The receipt of an account's erasure (GDPR art. 17): ids, counts and times, never text.

    The user row is gone with everything of theirs, so the account is a plain id here (no foreign
    key), and so is the staff member who erased it (`actor_id`; null: the user themself).
    """

    owner_id = models.BigIntegerField()
    actor_id = models.BigIntegerField(null=True, blank=True)
    # Rows deleted, by table (`chat_message`, `chat_thread`, ...), and tokens revoked.
    counts = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    # As a purge's (DeletionRequest): its transaction; when a vacuum that no older snapshot held back ran
    # (`erased_at`: the rows' old versions gone from the tables' files); when the text indexes were rebuilt.
    purge_xid = models.BigIntegerField(null=True, blank=True, editable=False)
    erased_at = models.DateTimeField(null=True, blank=True)
    scrubbed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"Account erasure {self.pk} (user {self.owner_id})"
