"""Serializers of the memory graph and its Find."""

from typing import Any

from django.conf import settings
from rest_framework import serializers

from chat.models import LIVE_STATUSES, Message
from core.api.fields import StrictCharField
from provenance.api.serializers.deletions import MAX_DEPTH
from provenance.graph import LABEL_CHARS, GraphNode, GraphWindow


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
    subject = serializers.CharField(
        allow_null=True,
        help_text="A fact's subject (role `fact`: one of chat/subjects.py's keys, e.g. home, work); null otherwise.",
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
        help_text="vector, lexical, both, transcript, system, agent (an agent's note derives from it), fact (a fact "
        "drawn from it), or empty (the question; window/full contexts)."
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
        "subject": node.subject,
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
