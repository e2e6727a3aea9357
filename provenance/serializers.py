"""JSON shapes of deletions, dependents, the graph and the export (API.md)."""

from typing import Any

from django.conf import settings
from django.db.models import Manager
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from chat.models import ContextEdge, Message
from chat.serializers import MessageSerializer, ThreadSerializer
from provenance.models import DeletionRequest
from provenance.selectors import LABEL_CHARS, imported_dependents_attach

# The recursive CTE compares depth with a PostgreSQL integer: a larger value
# overflowed into a 500. No history is that deep anyway.
MAX_DEPTH = 2**31 - 1


class TaintCheckSerializer(serializers.Serializer):
    passed = serializers.BooleanField()
    violations = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField()),
        help_text="[live message id, removed parent id] pairs: invariant I1 broken.",
    )


class GoneCheckSerializer(serializers.Serializer):
    passed = serializers.BooleanField()
    checked = serializers.IntegerField(help_text="Matched and deleted ids checked.")
    live = serializers.ListField(child=serializers.IntegerField(), help_text="Of those, the ones still live.")


class ForgetCheckSerializer(serializers.Serializer):
    passed = serializers.BooleanField()
    probes = serializers.IntegerField(help_text="Embeddings of deleted messages searched with.")
    threshold = serializers.FloatField(help_text="Cosine similarity a neighbour needs (the context threshold).")
    new_neighbours = serializers.ListField(
        child=serializers.IntegerField(), help_text="Live messages near a deleted one that were not before."
    )


class PurgeCheckSerializer(serializers.Serializer):
    passed = serializers.BooleanField()
    checked = serializers.IntegerField()
    with_content = serializers.ListField(child=serializers.IntegerField())
    with_embedding = serializers.ListField(child=serializers.IntegerField())


class ReceiptChecksSerializer(serializers.Serializer):
    taint = TaintCheckSerializer()
    gone = GoneCheckSerializer()
    forget = ForgetCheckSerializer()
    purge = PurgeCheckSerializer(allow_null=True, help_text="Purges and expiries only.")


class ReceiptSerializer(serializers.Serializer):
    """What the checks run right after execution found: ids and counts."""

    passed = serializers.BooleanField()
    failed = serializers.ListField(child=serializers.CharField(), help_text="Names of the checks that failed.")
    checks = ReceiptChecksSerializer()


class DeletionListSerializer(serializers.ListSerializer[Any]):
    """Reads every listed deletion's imported dependents in one query."""

    def to_representation(self, data: Any) -> list[Any]:
        deletions = list(data.all() if isinstance(data, Manager) else data)
        imported_dependents_attach(deletions)
        return super().to_representation(deletions)


class DeletionSerializer(serializers.ModelSerializer):
    """A deletion request and its outcome: ids and counts, never text."""

    matched = serializers.ListField(source="matched_ids", child=serializers.IntegerField())
    dependents = serializers.ListField(source="dependent_ids", child=serializers.IntegerField())
    deleted = serializers.ListField(
        source="deleted_ids", child=serializers.IntegerField(), help_text="Filled in when confirmed."
    )
    total = serializers.IntegerField(help_text="Matched plus dependents.")
    explanations = serializers.DictField(
        child=serializers.ListField(child=serializers.IntegerField()),
        help_text="For each dependent id, a path [matched id, ..., dependent id].",
    )
    receipt = ReceiptSerializer(
        read_only=True, allow_null=True, help_text="The verification run after execution; null before."
    )
    imported_dependents = serializers.SerializerMethodField(
        help_text="Dependents that are imported replies. Their provenance is unknown, so each counts every "
        "earlier message of its conversation as a source: deleting an imported message takes every later "
        "imported reply of that conversation."
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
            "explanations",
            "outcome",
            "created_at",
            "confirmed_at",
            "executed_at",
            "undone_at",
            "receipt",
            "verified_at",
            "imported_dependents",
        ]

    @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
    def get_imported_dependents(self, deletion: DeletionRequest) -> list[int]:
        if not hasattr(deletion, "imported_dependents"):
            imported_dependents_attach([deletion])
        return deletion.imported_dependents


class ChatDeletionSerializer(serializers.Serializer):
    deletion = DeletionSerializer()


class SelectSerializer(serializers.Serializer):
    """Exactly one of ids, exact, semantic or request."""

    ids = serializers.ListField(child=serializers.IntegerField(), required=False, help_text="Message ids.")
    exact = serializers.CharField(required=False, trim_whitespace=False, help_text="A phrase, case-insensitive.")
    semantic = serializers.CharField(required=False, trim_whitespace=False, help_text="Text matched by meaning.")
    threshold = serializers.FloatField(
        required=False, allow_null=True, help_text="Cosine similarity from -1 to 1, with `semantic` only."
    )
    request = serializers.CharField(
        required=False, trim_whitespace=False, help_text="Natural language: “forget that I live in Paris”."
    )


class DeletionInputSerializer(serializers.Serializer):
    select = SelectSerializer()
    mode = serializers.ChoiceField(choices=DeletionRequest.Mode.choices)
    expire_at = serializers.DateTimeField(required=False, allow_null=True, help_text="ISO-8601; `expire` only.")
    depth = serializers.IntegerField(
        required=False,
        allow_null=True,
        max_value=MAX_DEPTH,
        help_text="Taint level limit, >= 0; omit for the full Dep(M).",
    )


class DependentSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    seq = serializers.IntegerField()
    role = serializers.CharField()
    status = serializers.CharField()
    path = serializers.ListField(child=serializers.IntegerField(), help_text="Ids from the root to this message.")


class DependentsSerializer(serializers.Serializer):
    root = serializers.IntegerField()  # type: ignore[assignment]
    dependents = DependentSerializer(
        many=True, help_text="The nearest DELLM_MAX_EXPLANATION_PATHS dependents, in sequence order."
    )
    count = serializers.IntegerField(help_text="All of Dep(m) minus m.")
    truncated = serializers.BooleanField(help_text="True when `dependents` lists fewer than `count`.")


class DependentsQuerySerializer(serializers.Serializer):
    depth = serializers.IntegerField(
        required=False, min_value=0, max_value=MAX_DEPTH, help_text="Taint level limit; default none."
    )


class GraphQuerySerializer(serializers.Serializer):
    thread = serializers.IntegerField(required=False, help_text="Only this thread's messages.")
    include_deleted = serializers.BooleanField(
        required=False, default=False, help_text="Also show deleted, purged messages."
    )
    before = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_DEPTH, help_text="Only messages with a smaller `seq` (older)."
    )
    limit = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=settings.DELLM_GRAPH_MAX_NODES,
        help_text="Messages in the window (default DELLM_GRAPH_WINDOW, at most DELLM_GRAPH_MAX_NODES).",
    )


class DeletionListQuerySerializer(serializers.Serializer):
    page = serializers.IntegerField(required=False, min_value=1, help_text="Page number (Link header: next, prev).")
    page_size = serializers.IntegerField(
        required=False, min_value=1, max_value=settings.DELLM_MAX_PAGE_SIZE, help_text="Deletions per page."
    )


class NodeDataSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    seq = serializers.IntegerField()
    role = serializers.CharField()
    status = serializers.CharField()
    label = serializers.SerializerMethodField()  # type: ignore[assignment]
    thread = serializers.IntegerField(source="thread_id")
    imported_from = serializers.SerializerMethodField(help_text="The tool it was imported from; null for DeLLM's own.")

    def get_imported_from(self, message: Message) -> str | None:
        return message.imported_from or None

    def get_label(self, message: Message) -> str:
        head = f"#{message.seq} {message.role}"
        if message.status == Message.Status.PURGED:
            return head
        snippet = message.snippet  # type: ignore[attr-defined]  # annotated by selectors.graph_nodes
        if len(snippet) > LABEL_CHARS:
            snippet = snippet[:LABEL_CHARS].rstrip() + "…"
        return f"{head}: {' '.join(snippet.split())}"


class NodeSerializer(serializers.Serializer):
    data = NodeDataSerializer(source="*")  # type: ignore[assignment]


class EdgeDataSerializer(serializers.Serializer):
    id = serializers.SerializerMethodField()
    source = serializers.IntegerField(source="source_id")  # type: ignore[assignment]
    target = serializers.IntegerField(source="target_id")
    score = serializers.FloatField()
    rank = serializers.IntegerField()
    signal = serializers.CharField(help_text="vector, lexical, both, or empty (the question; window/full contexts).")

    def get_id(self, edge: ContextEdge) -> str:
        return f"e{edge.source_id}-{edge.target_id}"


class EdgeSerializer(serializers.Serializer):
    data = EdgeDataSerializer(source="*")  # type: ignore[assignment]


class GraphSerializer(serializers.Serializer):
    """Cytoscape.js elements: a window of the newest messages, and the edges among them."""

    nodes = NodeSerializer(many=True)
    edges = EdgeSerializer(many=True)
    total = serializers.IntegerField(help_text="Messages matching the filters, in or out of the window.")
    truncated = serializers.BooleanField(help_text="Older messages, or edges past DELLM_GRAPH_MAX_EDGES, left out.")
    next = serializers.URLField(allow_null=True, help_text="The window of older messages (`before=`), or null.")


class ExportEdgeSerializer(serializers.Serializer):
    source = serializers.IntegerField(source="source_id")  # type: ignore[assignment]
    target = serializers.IntegerField(source="target_id")
    score = serializers.FloatField()
    rank = serializers.IntegerField()
    signal = serializers.CharField()


class ExportSerializer(serializers.Serializer):
    exported_at = serializers.DateTimeField()
    username = serializers.CharField()
    threads = ThreadSerializer(many=True)
    messages = MessageSerializer(many=True, help_text="Active messages only.")
    edges = ExportEdgeSerializer(many=True, help_text="Edges among the exported messages.")
    deletions = DeletionSerializer(many=True, help_text="Deletion history: ids and counts, no deleted text.")
