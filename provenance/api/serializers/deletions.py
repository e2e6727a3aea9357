"""Serializers of deletions: input, the preview and the deletion as shown, confirm and undo."""

from typing import Any

from django.conf import settings
from django.db.models import Manager
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.api.fields import AwareDateTimeField, StrictCharField
from provenance.api.serializers.receipts import AgentReadsSerializer, ReceiptSerializer
from provenance.deletions.facts import facts_attach
from provenance.deletions.selectors import (
    agent_reads_attach,
    imported_dependents_attach,
    removes_attach,
    tool_steps_attach,
)
from provenance.models import DeletionRequest
from provenance.regeneration.replies import regeneration_progress

# The recursive CTE compares depth with a PostgreSQL integer: a larger value
# overflowed into a 500. No history is that deep anyway.
MAX_DEPTH = 2**31 - 1


class DeletionListSerializer(serializers.ListSerializer[Any]):
    """Reads every listed deletion's imported dependents, what previews remove, tool steps and reads in a query each."""

    def to_representation(self, data: Any) -> list[Any]:
        deletions = list(data.all() if isinstance(data, Manager) else data)
        imported_dependents_attach(deletions)
        removes_attach(deletions)
        tool_steps_attach(deletions)
        agent_reads_attach(deletions)
        facts_attach(deletions)
        return super().to_representation(deletions)


class ToolStepSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.ChoiceField(
        choices=["call", "result", "answer"],
        help_text="call: a reply that called the client's tools; result: the client's result for one call; "
        "answer: a reply written after tool results.",
    )


class RegenerationTurnSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The turn: GET /api/turns/{id}/ and its events, like any turn.")
    replaces = serializers.IntegerField(help_text="Id of the removed reply this turn rewrites.")
    message = serializers.IntegerField(source="user_message_id", help_text="The user message it answers.")
    status = serializers.CharField()
    reply = serializers.IntegerField(source="reply_id", allow_null=True, help_text="The rewritten reply, once done.")
    error = serializers.CharField(help_text="Why it failed, for humans; empty otherwise.")


class RegenerationSerializer(serializers.Serializer):
    """Progress of rewriting the removed replies: n of N rewritten, the failed ones."""

    state = serializers.ChoiceField(choices=["running", "done", "failed", "cancelled"])
    total = serializers.IntegerField()
    rewritten = serializers.IntegerField()
    failed = serializers.IntegerField()
    pending = serializers.IntegerField()
    turns = RegenerationTurnSerializer(many=True)


class RedactionProposalSerializer(serializers.Serializer):
    message = serializers.IntegerField(help_text="A matched user message.")
    text = serializers.CharField(help_text="That message without the matched words' sentences or clauses.")
    regenerate = serializers.ListField(
        child=serializers.IntegerField(), help_text="Replies rewritten if this redaction is confirmed."
    )


class RederivedFactSerializer(serializers.Serializer):
    fact = serializers.IntegerField(help_text="A fact in Dep that keeps live sources outside it.")
    sources = serializers.ListField(
        source="from", child=serializers.IntegerField(), help_text="Those sources: it is drawn again from them alone."
    )
    new = serializers.IntegerField(
        source="as", required=False, allow_null=True, help_text="Once executed: the re-derived fact (null: not yet)."
    )


class ReinstatedFactSerializer(serializers.Serializer):
    fact = serializers.IntegerField(help_text="An older fact that is current again.")
    instead_of = serializers.IntegerField(help_text="The newer fact of its subject that this deletion removes.")
    subject = serializers.CharField()


class FactsEffectSerializer(serializers.Serializer):
    removed = serializers.ListField(child=serializers.IntegerField(), help_text="The facts in Dep, removed with it.")
    rederived = RederivedFactSerializer(many=True)
    reinstated = ReinstatedFactSerializer(many=True)


class RelatedSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=["message", "fact"])
    reason = serializers.CharField(help_text="Why it is listed: a fact of the same subject, or similar meaning.")


class IdListField(serializers.ListField):
    """Ids as stored (integers in an array or JSON column), written out as they are.

    ListField would call its child once per id; a purge's `dependents` and
    `deleted` hold thousands.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(child=serializers.IntegerField(), **kwargs)

    def to_representation(self, data: Any) -> list[int]:
        return list(data)


class PathsField(serializers.DictField):
    """{dependent id: [root, ..., dependent]}, written out as stored (one call, not one per id of every path)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(child=serializers.ListField(child=serializers.IntegerField()), **kwargs)

    def to_representation(self, value: Any) -> dict[str, list[int]]:
        return {str(key): list(path) for key, path in value.items()}


class DeletionSerializer(serializers.ModelSerializer):
    """A deletion request and its outcome: ids and counts, never text."""

    matched = IdListField(source="matched_ids")
    dependents = IdListField(source="dependent_ids")
    deleted = IdListField(source="deleted_ids", help_text="Filled in when confirmed.")
    total = serializers.IntegerField(help_text="Matched plus dependents.")
    removes = serializers.SerializerMethodField(
        help_text="A preview only (null otherwise): how many of `total` confirming would change now. Dep holds "
        "messages other deletions removed already: `soft` counts the live ones, `purge` and `expire` every one "
        "not purged yet."
    )
    explanations = PathsField(
        help_text="For the nearest DELLM_MAX_EXPLANATION_PATHS dependents, a path [matched id, ..., dependent id]."
    )
    receipt = ReceiptSerializer(
        read_only=True, allow_null=True, help_text="The verification run after execution; null before."
    )
    verifying = serializers.SerializerMethodField(
        help_text="True from execution until the receipt is written: the checks run after confirm returns."
    )
    imported_dependents = serializers.SerializerMethodField(
        help_text="Dependents that are imported replies. Their provenance is unknown, so each counts every "
        "earlier message of its conversation as a source: deleting an imported message takes every later "
        "imported reply of that conversation."
    )
    regenerate = serializers.ListField(
        source="regenerate_ids",
        child=serializers.IntegerField(),
        help_text="Replies rewritten without the removed messages (preview: if `derived` is regenerate).",
    )
    model_calls = serializers.SerializerMethodField(help_text="What regenerating costs: one model call per reply.")
    redacted = serializers.DictField(
        child=serializers.IntegerField(), help_text="{original message id: id of its redacted replacement}."
    )
    redactions = serializers.SerializerMethodField(
        help_text="Only in the response that creates the preview (never stored): redacted texts on offer."
    )
    redactions_truncated = serializers.SerializerMethodField(
        help_text="Only in the response that creates the preview: true if some matched user messages were not "
        "scanned for a redaction (DELLM_REDACTION_MAX_MESSAGES, DELLM_REDACTION_MAX_CHARS)."
    )
    redactions_unscanned = serializers.SerializerMethodField(
        help_text="Only in the response that creates the preview: ids of those messages, oldest first. "
        "Confirming deletes them whole unless `redactions` gives a text for them."
    )
    regeneration = serializers.SerializerMethodField(help_text="Null unless this deletion rewrites replies.")
    undo_removed = serializers.ListField(
        source="undo_removed_ids", child=serializers.IntegerField(), help_text="Rewrites an undo removed."
    )
    tool_steps = serializers.SerializerMethodField(
        help_text="The tool steps among the matched and dependent messages (a `/v1` client's tool calls, their "
        "results, the replies that used them). They are deleted even with `derived` regenerate: DeLLM cannot run "
        "the client's tools again, so none of them is in `regenerate`."
    )
    agent_reads = serializers.SerializerMethodField(
        help_text="Which of these messages MCP clients read, by which client and when: copies DeLLM cannot erase."
    )
    facts = serializers.SerializerMethodField(
        help_text="What it does to facts: the facts in Dep, those re-derived from their surviving sources, and "
        "older facts that become current again (docs/subsystems/facts.md)."
    )
    related = serializers.SerializerMethodField(
        help_text="Only in the response that creates the preview: the user's other live messages and facts that "
        "carry the same information but are not in Dep (unticked suggestions, each with its reason)."
    )
    resolution = serializers.SerializerMethodField(
        help_text="Only in the response that creates a preview selected by identifier (null otherwise): "
        "`named`, each identifier it was read as (`kind`, `as`: 'the e-mail address dana@example.org'), and "
        "`near_misses`, the messages kept although they hold another identifier of the same kind "
        "(`message`, `kind`, `reason`), for the user to add."
    )

    class Meta:
        model = DeletionRequest
        list_serializer_class = DeletionListSerializer
        fields = [
            "id",
            "status",
            "mode",
            "selector",
            "resolved_selector",
            "threshold",
            "depth",
            "expire_at",
            "matched",
            "dependents",
            "deleted",
            "total",
            "removes",
            "explanations",
            "outcome",
            "created_at",
            "confirmed_at",
            "executed_at",
            "undone_at",
            "receipt",
            "verified_at",
            "verifying",
            "erased_at",
            "imported_dependents",
            "derived",
            "regenerate",
            "model_calls",
            "redactions",
            "redactions_truncated",
            "redactions_unscanned",
            "redacted",
            "regeneration",
            "undo_removed",
            "tool_steps",
            "agent_reads",
            "facts",
            "related",
            "resolution",
        ]

    @extend_schema_field(ToolStepSerializer(many=True))
    def get_tool_steps(self, deletion: DeletionRequest) -> list[dict[str, Any]]:
        if not hasattr(deletion, "tool_steps"):
            tool_steps_attach([deletion])
        return deletion.tool_steps

    @extend_schema_field(FactsEffectSerializer())
    def get_facts(self, deletion: DeletionRequest) -> dict[str, Any]:
        if not hasattr(deletion, "facts"):
            facts_attach([deletion])
        return FactsEffectSerializer(deletion.facts).data

    @extend_schema_field(RelatedSerializer(many=True))
    def get_related(self, deletion: DeletionRequest) -> list[dict[str, Any]]:
        return [dict(item) for item in getattr(deletion, "related", ())]

    def get_removes(self, deletion: DeletionRequest) -> int | None:
        if not hasattr(deletion, "removes"):
            removes_attach([deletion])
        return deletion.removes

    def get_verifying(self, deletion: DeletionRequest) -> bool:
        return deletion.status == DeletionRequest.Status.EXECUTED and deletion.receipt is None

    @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
    def get_imported_dependents(self, deletion: DeletionRequest) -> list[int]:
        if not hasattr(deletion, "imported_dependents"):
            imported_dependents_attach([deletion])
        return deletion.imported_dependents

    @extend_schema_field(AgentReadsSerializer())
    def get_agent_reads(self, deletion: DeletionRequest) -> dict[str, Any]:
        if not hasattr(deletion, "agent_reads"):
            agent_reads_attach([deletion])
        return AgentReadsSerializer(deletion.agent_reads).data

    @extend_schema_field(serializers.JSONField(allow_null=True))
    def get_resolution(self, deletion: DeletionRequest) -> dict[str, Any] | None:
        return deletion.resolution

    def get_model_calls(self, deletion: DeletionRequest) -> int:
        return len(deletion.regenerate_ids)

    @extend_schema_field(RedactionProposalSerializer(many=True))
    def get_redactions(self, deletion: DeletionRequest) -> list[dict[str, Any]]:
        return [dict(proposal) for proposal in deletion.redaction_proposals]

    def get_redactions_truncated(self, deletion: DeletionRequest) -> bool:
        return bool(deletion.redactions_unscanned)

    @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
    def get_redactions_unscanned(self, deletion: DeletionRequest) -> list[int]:
        return list(deletion.redactions_unscanned)

    @extend_schema_field(RegenerationSerializer(allow_null=True))
    def get_regeneration(self, deletion: DeletionRequest) -> dict | None:
        progress = regeneration_progress(deletion=deletion)
        return None if progress is None else RegenerationSerializer(progress).data


class DeletionConfirmSerializer(serializers.Serializer):
    derived = serializers.ChoiceField(
        choices=DeletionRequest.Derived.choices, required=False, help_text="Overrides the preview's choice."
    )
    redactions = serializers.DictField(
        child=StrictCharField(allow_blank=True, trim_whitespace=False),
        required=False,
        help_text="{matched user message id: the approved redacted text}; each replaces its message.",
    )


class UndoPreviewSerializer(serializers.Serializer):
    deletion = serializers.IntegerField()
    restores = serializers.ListField(child=serializers.IntegerField(), help_text="Messages an undo brings back.")
    removes = serializers.ListField(
        child=serializers.IntegerField(), help_text="Rewritten replies, redacted replacements and their Dep."
    )
    explanations = serializers.DictField(
        child=serializers.ListField(child=serializers.IntegerField()),
        help_text="For each removed id, a path [rewrite id, ..., id].",
    )


class ChatDeletionSerializer(serializers.Serializer):
    deletion = DeletionSerializer()


class SelectSerializer(serializers.Serializer):
    """Exactly one of ids, exact, semantic, identifier, words, subject or request."""

    ids = serializers.ListField(child=serializers.IntegerField(), required=False, help_text="Message ids.")
    exact = StrictCharField(required=False, trim_whitespace=False, help_text="A phrase, case-insensitive.")
    semantic = StrictCharField(required=False, trim_whitespace=False, help_text="Text matched by meaning.")
    identifier = StrictCharField(
        required=False,
        trim_whitespace=False,
        help_text="Text naming identifiers (an e-mail address, a phone or card number, an IBAN, a web address, a "
        "handle, a key): the messages holding one, however written, and never a neighbour.",
    )
    words = StrictCharField(
        required=False, trim_whitespace=False, help_text="A name or phrase, as whole words (“Ana”, not “Anastasia”)."
    )
    subject = StrictCharField(
        required=False,
        help_text="A subject (work, home, origin, study, partner, health, pet): its facts, their sources and the "
        "statements in its words, each redacted to the clause about it where it says more.",
    )
    threshold = serializers.FloatField(
        required=False, allow_null=True, help_text="Cosine similarity from -1 to 1, with `semantic` only."
    )
    request = StrictCharField(
        required=False, trim_whitespace=False, help_text="Natural language: “forget that I live in Paris”."
    )


class DeletionInputSerializer(serializers.Serializer):
    select = SelectSerializer()
    mode = serializers.ChoiceField(choices=DeletionRequest.Mode.choices)
    expire_at = AwareDateTimeField(
        required=False, allow_null=True, help_text="ISO-8601 with its time zone; `expire` only."
    )
    depth = serializers.IntegerField(
        required=False,
        allow_null=True,
        max_value=MAX_DEPTH,
        help_text="Taint level limit, >= 0; omit for the full Dep(M).",
    )
    derived = serializers.ChoiceField(
        choices=DeletionRequest.Derived.choices,
        required=False,
        help_text="The replies in Dep(M) \\ M: `delete` (default) or `regenerate` (rewritten without M).",
    )


class DeletionListQuerySerializer(serializers.Serializer):
    page = serializers.IntegerField(required=False, min_value=1, help_text="Page number (Link header: next, prev).")
    page_size = serializers.IntegerField(
        required=False, min_value=1, max_value=settings.DELLM_MAX_PAGE_SIZE, help_text="Deletions per page."
    )
