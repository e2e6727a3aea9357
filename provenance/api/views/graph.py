"""The memory graph and its Find (docs/API.md, "Graph")."""

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.handler import errors, validated
from core.api.renderers import FastJSONRenderer
from core.api.throttles import CostThrottle
from core.types import AuthenticatedRequest
from provenance.api.serializers.graph import (
    GraphFindQuerySerializer,
    GraphFindSerializer,
    GraphQuerySerializer,
    GraphSerializer,
    graph_body,
)
from provenance.graph import graph_find, graph_window


def _window_params(query: dict[str, Any]) -> dict[str, Any]:
    """The graph window a validated GraphQuerySerializer names: the graph and its Find read the same one."""
    return {
        "thread_id": query.get("thread"),
        "include_deleted": query["include_deleted"],
        "before": query.get("before"),
        "limit": query.get("limit") or settings.DELLM_GRAPH_WINDOW,
    }


class GraphView(APIView):
    throttle_classes = [CostThrottle]
    throttle_scopes = {"GET": "graph"}
    # The window is plain JSON of up to a few MB (10,000 messages: 4 MB).
    renderer_classes = [FastJSONRenderer]

    @extend_schema(
        parameters=[GraphQuerySerializer],
        responses={200: GraphSerializer, **errors(400, 404, 429)},
        summary="A window of the provenance graph as Cytoscape.js elements (the newest messages; `next` loads older)",
    )
    def get(self, request: AuthenticatedRequest) -> Response:
        query = validated(GraphQuerySerializer, request.query_params)
        window = graph_window(owner=request.user, max_edges=settings.DELLM_GRAPH_MAX_EDGES, **_window_params(query))
        next_url = None
        if window.older:
            params = request.query_params.copy()
            params["before"] = str(window.nodes[0].seq)
            next_url = request.build_absolute_uri(f"{request.path}?{params.urlencode()}")
        return Response(graph_body(window, next_url=next_url))


class GraphFindView(APIView):
    """Find in the graph: the window's messages whose own words match (their labels show only the first words)."""

    throttle_classes = [CostThrottle]
    throttle_scopes = {"GET": "search"}

    @extend_schema(
        parameters=[GraphFindQuerySerializer],
        responses={200: GraphFindSerializer, **errors(400, 404, 429)},
        summary="Find words among what the graph window's messages say",
    )
    def get(self, request: AuthenticatedRequest) -> Response:
        query = validated(GraphFindQuerySerializer, request.query_params)
        ids = graph_find(owner=request.user, q=query["q"], **_window_params(query))
        return Response(GraphFindSerializer({"ids": ids}).data)
