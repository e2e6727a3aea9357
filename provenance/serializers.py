"""JSON shapes of deletions, dependents, the graph and the export (API.md)."""

from typing import Any

from django.conf import settings
from django.db.models import Manager
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from chat.models import LIVE_STATUSES, Message
from chat.serializers import MessageSerializer, ThreadSerializer
from dellm_site.json_fields import AwareDateTimeField, StrictCharField
from provenance.models import DeletionRequest
from provenance.regeneration import regeneration_progress
from provenance.selectors import (
    LABEL_CHARS,
    GraphNode,
    GraphWindow,
    agent_reads_attach,
    imported_dependents_attach,
    removes_attach,
    tool_steps_attach,
)

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
    of = serializers.IntegerField(
        required=False, help_text="Deleted messages with an embedding; `probes` are the first of them."
    )
    threshold = serializers.FloatField(help_text="Cosine similarity a neighbour needs (the context threshold).")
    new_neighbours = serializers.ListField(
        child=serializers.IntegerField(), help_text="Live messages near a deleted one that were not before."
    )
    lexical_floor = serializers.FloatField(
        required=False, help_text="The lexical floor a match reaches (DELLM_LEXICAL_FLOOR), as in retrieval."
    )
    new_lexical_neighbours = serializers.ListField(
        child=serializers.IntegerField(),
        required=False,
        help_text="Live messages matching a deleted one's words past the floor that did not before.",
    )
    not_run = serializers.CharField(
        required=False,
        help_text="Only when the check could not run: the process verifying the deletion stopped before its "
        "receipt (then `passed` is false).",
    )


class PurgeCheckSerializer(serializers.Serializer):
    passed = serializers.BooleanField()
    checked = serializers.IntegerField()
    with_content = serializers.ListField(child=serializers.IntegerField())
    with_embedding = serializers.ListField(child=serializers.IntegerField())


class RegenerationCheckSerializer(serializers.Serializer):
    passed = serializers.BooleanField()
    total = serializers.IntegerField(help_text="Replies to rewrite.")
    rewritten = serializers.ListField(child=serializers.IntegerField(), help_text="Ids of the rewritten replies.")
    failed = serializers.ListField(
        child=serializers.IntegerField(), help_text="Old reply ids not rewritten (resumable)."
    )
    pending = serializers.ListField(child=serializers.IntegerField(), help_text="Old reply ids still to rewrite.")
    taint_violations = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField()), help_text="I1 after the rewrites."
    )
    context_violations = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField()),
        help_text="[rewritten reply, context message that is not live] pairs.",
    )


class IndexesCheckSerializer(serializers.Serializer):
    passed = serializers.BooleanField()
    recomputed = serializers.IntegerField(help_text="Indexes this deletion rebuilt from live turns.")
    stale = serializers.ListField(
        child=serializers.IntegerField(), help_text="Live messages whose index is still built from a deleted one."
    )


class ReceiptChecksSerializer(serializers.Serializer):
    taint = TaintCheckSerializer()
    gone = GoneCheckSerializer()
    forget = ForgetCheckSerializer()
    purge = PurgeCheckSerializer(allow_null=True, help_text="Purges and expiries only.")
    regeneration = RegenerationCheckSerializer(
        required=False, help_text="Once the rewrites of a regenerating deletion have run."
    )
    indexes = IndexesCheckSerializer(required=False, help_text="Every deletion verified since indexes carry turns.")


class AgentReadSerializer(serializers.Serializer):
    client = serializers.CharField(help_text="The MCP client's name, as its `clientInfo` gave it.")
    tool = serializers.CharField(help_text="The tool that read: search_memory or explain.")
    read_at = serializers.DateTimeField()
    messages = serializers.ListField(child=serializers.IntegerField(), help_text="This deletion's messages it read.")


class AgentReadsSerializer(serializers.Serializer):
    """Which of a deletion's messages MCP clients were shown, by which client and when (chat.MemoryRead)."""

    count = serializers.IntegerField(help_text="Reads of any of these messages.")
    reads = AgentReadSerializer(many=True, help_text="The newest 50.")
    note = serializers.CharField(help_text="That DeLLM cannot erase the clients' copies; empty when none read.")


class ReceiptSerializer(serializers.Serializer):
    """What the checks run right after execution found: ids and counts."""

    passed = serializers.BooleanField()
    failed = serializers.ListField(child=serializers.CharField(), help_text="Names of the checks that failed.")
    checks = ReceiptChecksSerializer()
    agent_reads = AgentReadsSerializer(
        required=False, help_text="Only if MCP clients read any of its messages: those reads when it executed."
    )


class DeletionListSerializer(serializers.ListSerializer[Any]):
    """Reads every listed deletion's imported dependents, what previews remove, tool steps and reads in a query each."""

    def to_representation(self, data: Any) -> list[Any]:
        deletions = list(data.all() if isinstance(data, Manager) else data)
        imported_dependents_attach(deletions)
        removes_attach(deletions)
        tool_steps_attach(deletions)
        agent_reads_attach(deletions)
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
        ]

    @extend_schema_field(ToolStepSerializer(many=True))
    def get_tool_steps(self, deletion: DeletionRequest) -> list[dict[str, Any]]:
        if not hasattr(deletion, "tool_steps"):
            tool_steps_attach([deletion])
        return deletion.tool_steps

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
    """Exactly one of ids, exact, semantic or request."""

    ids = serializers.ListField(child=serializers.IntegerField(), required=False, help_text="Message ids.")
    exact = StrictCharField(required=False, trim_whitespace=False, help_text="A phrase, case-insensitive.")
    semantic = StrictCharField(required=False, trim_whitespace=False, help_text="Text matched by meaning.")
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


class DependentSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    seq = serializers.IntegerField()
    role = serializers.CharField()
    status = serializers.CharField()
    path = serializers.ListField(child=serializers.IntegerField(), help_text="Ids from the root to this message.")


class DependentsSerializer(serializers.Serializer):
    root = serializers.IntegerField()  # type: ignore[assignment]
    dependents = DependentSerializer(
        many=True,
        help_text="The nearest `paths` (default and at most DELLM_MAX_EXPLANATION_PATHS) dependents, in sequence "
        "order, each with its path; GET .../dependents/{id}/ gives any other one's.",
    )
    ids = serializers.ListField(child=serializers.IntegerField(), help_text="All of Dep(m) minus m, ascending.")
    count = serializers.IntegerField(help_text="All of Dep(m) minus m.")
    live = serializers.IntegerField(
        help_text="The live ones of `count`: what a soft deletion of m removes with it (the rest are removed already)."
    )
    truncated = serializers.BooleanField(help_text="True when `dependents` lists fewer than `count`.")

    def to_representation(self, instance: Any) -> dict[str, Any]:
        # The declared fields describe the schema; the body is built directly:
        # `ids` may hold 100,000 integers and a field per element would cost
        # more than the walk that found them.
        return {
            "root": instance["root"],
            "dependents": [
                {"id": d.id, "seq": d.seq, "role": d.role, "status": d.status, "path": list(d.path)}
                for d in instance["dependents"]
            ],
            "ids": list(instance["ids"]),
            "count": instance["count"],
            "live": instance["live"],
            "truncated": instance["truncated"],
        }


class DependentPathSerializer(serializers.Serializer):
    root = serializers.IntegerField()  # type: ignore[assignment]
    id = serializers.IntegerField()
    path = serializers.ListField(
        child=serializers.IntegerField(), help_text="A shortest path [root, ..., id], as `dependents` lists it."
    )


class DependentsQuerySerializer(serializers.Serializer):
    depth = serializers.IntegerField(
        required=False, min_value=0, max_value=MAX_DEPTH, help_text="Taint level limit; default none."
    )
    paths = serializers.IntegerField(
        required=False,
        min_value=0,
        help_text="How many dependents to list with their paths (default and at most "
        "DELLM_MAX_EXPLANATION_PATHS; 0: ids and count only).",
    )

    def validate_paths(self, value: int) -> int:
        return min(value, settings.DELLM_MAX_EXPLANATION_PATHS)


class DependentPathQuerySerializer(serializers.Serializer):
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


class GraphFindQuerySerializer(GraphQuerySerializer):
    q = StrictCharField(
        max_length=200, help_text="Words to find (web search syntax), among what the window's messages say."
    )


class GraphFindSerializer(serializers.Serializer):
    ids = serializers.ListField(
        child=serializers.IntegerField(), help_text="The window's messages whose own words match, in seq order."
    )


class DeletionListQuerySerializer(serializers.Serializer):
    page = serializers.IntegerField(required=False, min_value=1, help_text="Page number (Link header: next, prev).")
    page_size = serializers.IntegerField(
        required=False, min_value=1, max_value=settings.DELLM_MAX_PAGE_SIZE, help_text="Deletions per page."
    )


class NodeDataSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    seq = serializers.IntegerField()
    role = serializers.CharField()
    status = serializers.CharField()
    label = serializers.CharField(  # type: ignore[assignment]
        help_text="`#seq role: ` and the text's first 40 characters; `#seq role` if purged."
    )
    thread = serializers.IntegerField()
    imported_from = serializers.CharField(
        allow_null=True, help_text="The tool it was imported from; null for DeLLM's own."
    )
    tool_step = serializers.CharField(
        allow_null=True,
        help_text="call (a reply that called a `/v1` client's tools), result (the client's tool result), or null.",
    )


class NodeSerializer(serializers.Serializer):
    data = NodeDataSerializer()  # type: ignore[assignment]


class EdgeDataSerializer(serializers.Serializer):
    id = serializers.CharField()
    source = serializers.IntegerField()  # type: ignore[assignment]
    target = serializers.IntegerField()
    score = serializers.FloatField()
    rank = serializers.IntegerField()
    signal = serializers.CharField(
        help_text="vector, lexical, both, transcript, system, agent (an agent's note derives from it), or empty "
        "(the question; window/full contexts)."
    )


class EdgeSerializer(serializers.Serializer):
    data = EdgeDataSerializer()  # type: ignore[assignment]


class GraphSerializer(serializers.Serializer):
    """Cytoscape.js elements: a window of the newest messages, and the edges among them.

    The schema only: `graph_body` writes the answer, a plain dict per element,
    since DRF's fields cost about 100 ms per 1,000 nodes and their edges."""

    nodes = NodeSerializer(many=True)
    edges = EdgeSerializer(many=True)
    total = serializers.IntegerField(help_text="Messages matching the filters, in or out of the window.")
    truncated = serializers.BooleanField(help_text="Older messages, or edges past DELLM_GRAPH_MAX_EDGES, left out.")
    next = serializers.URLField(allow_null=True, help_text="The window of older messages (`before=`), or null.")


def graph_body(window: GraphWindow, *, next_url: str | None, staff: bool = False) -> dict[str, Any]:
    """GraphSerializer's document for `window`. Staff pages (`staff`) show no removed text at all."""
    return {
        "nodes": [{"data": _node_data(node, staff=staff)} for node in window.nodes],
        "edges": [
            {
                "data": {
                    "id": f"e{edge.source_id}-{edge.target_id}",
                    "source": edge.source_id,
                    "target": edge.target_id,
                    "score": edge.score,
                    "rank": edge.rank,
                    "signal": edge.signal,
                }
            }
            for edge in window.edges
        ],
        "total": window.total,
        "truncated": window.older or window.edges_capped,
        "next": next_url,
    }


def _node_data(node: GraphNode, *, staff: bool) -> dict[str, Any]:
    tool_step = "result" if node.role == Message.Role.TOOL else "call" if node.called else None
    return {
        "id": node.id,
        "seq": node.seq,
        "role": node.role,
        "status": node.status,
        "label": _node_label(node, staff=staff),
        "thread": node.thread_id,
        "imported_from": node.imported_from or None,
        "tool_step": tool_step,
    }


def _node_label(node: GraphNode, *, staff: bool) -> str:
    head = f"#{node.seq} {node.role}"
    if node.status == Message.Status.PURGED or (staff and node.status not in LIVE_STATUSES):
        return head
    snippet = node.snippet
    if not snippet.strip() and node.called:
        return f"{head}: (tool call)"
    if len(snippet) > LABEL_CHARS:
        snippet = snippet[:LABEL_CHARS].rstrip() + "…"
    return f"{head}: {' '.join(snippet.split())}"


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
