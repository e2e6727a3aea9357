"""HTTP API for deletions, provenance and export. Each view: validate -> one service or selector -> serialize."""

from collections.abc import Iterator
from itertools import islice
from typing import Any

from django.conf import settings
from django.http import StreamingHttpResponse
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from chat import selectors as chat_selectors
from chat.serializers import MessageSerializer, ThreadSerializer
from dellm_site.api import CostThrottle, LinkHeaderPagination, errors, validated
from dellm_site.errors import ValidationFailed
from dellm_site.renderers import FastJSONRenderer
from dellm_site.types import AuthenticatedRequest, User
from provenance import selectors, services
from provenance.models import DeletionRequest
from provenance.regeneration import undo_plan
from provenance.requests import resolve_deletion_request
from provenance.serializers import (
    DeletionConfirmSerializer,
    DeletionInputSerializer,
    DeletionListQuerySerializer,
    DeletionSerializer,
    DependentPathQuerySerializer,
    DependentPathSerializer,
    DependentsQuerySerializer,
    DependentsSerializer,
    ExportEdgeSerializer,
    ExportSerializer,
    GraphFindQuerySerializer,
    GraphFindSerializer,
    GraphQuerySerializer,
    GraphSerializer,
    UndoPreviewSerializer,
    graph_body,
)


def _selection(*, owner: User, select: dict[str, Any]) -> dict[str, Any]:
    """`deletion_preview` keyword arguments for the body's `select`."""
    if "request" not in select:
        return {key: select[key] for key in ("ids", "exact", "semantic", "threshold") if key in select}
    if any(key in select for key in ("ids", "exact", "semantic")):
        raise ValidationFailed(
            "Select messages with exactly one of ids, exact, semantic or request.", fields={"select": "one selector"}
        )
    selection = resolve_deletion_request(owner=owner, text=select["request"])
    if "threshold" in select:
        selection["threshold"] = select["threshold"]
    return selection | {"selector": "request"}


class DeletionListView(APIView):
    throttle_classes = [CostThrottle]
    throttle_scopes = {"POST": "deletion_preview"}

    @extend_schema(
        parameters=[DeletionListQuerySerializer],
        responses={200: DeletionSerializer(many=True), **errors(400, 404)},
        summary="The caller's deletion history, newest first, a page at a time (Link header)",
    )
    def get(self, request: AuthenticatedRequest) -> Response:
        paginator = LinkHeaderPagination()
        page = paginator.paginate_queryset(selectors.deletion_list(owner=request.user), request, view=self)
        return paginator.get_paginated_response(DeletionSerializer(page, many=True).data)

    @extend_schema(
        request=DeletionInputSerializer,
        responses={
            201: OpenApiResponse(DeletionSerializer, description="A preview; nothing has changed yet."),
            **errors(400, 404, 415, 429),
        },
        summary="Preview a deletion",
    )
    def post(self, request: AuthenticatedRequest) -> Response:
        data = validated(DeletionInputSerializer, request.data)
        deletion = services.deletion_preview(
            owner=request.user,
            actor=request.user,
            mode=data["mode"],
            depth=data.get("depth"),
            expire_at=data.get("expire_at"),
            derived=data.get("derived"),
            **_selection(owner=request.user, select=data["select"]),
        )
        return Response(DeletionSerializer(deletion).data, status=status.HTTP_201_CREATED)


class DeletionDetailView(APIView):
    @extend_schema(responses={200: DeletionSerializer, **errors(404)}, summary="One deletion")
    def get(self, request: AuthenticatedRequest, deletion_id: int) -> Response:
        return Response(DeletionSerializer(selectors.deletion_get(owner=request.user, deletion_id=deletion_id)).data)


class DeletionConfirmView(APIView):
    throttle_classes = [CostThrottle]
    throttle_scopes = {"POST": "deletion_action"}

    @extend_schema(
        request=DeletionConfirmSerializer,
        responses={200: DeletionSerializer, **errors(400, 404, 409, 429)},
        summary="Confirm a previewed deletion (executes it, or schedules an expiry)",
    )
    def post(self, request: AuthenticatedRequest, deletion_id: int) -> Response:
        data = validated(DeletionConfirmSerializer, request.data or {})
        deletion = services.deletion_confirm(
            deletion_id=deletion_id,
            owner_id=request.user.pk,
            confirmed_by=request.user,
            derived=data.get("derived"),
            redactions=data.get("redactions"),
            verify_later=True,
        )
        return Response(DeletionSerializer(deletion).data)


class DeletionCancelView(APIView):
    throttle_classes = [CostThrottle]
    throttle_scopes = {"POST": "deletion_action"}

    @extend_schema(
        request=None,
        responses={200: DeletionSerializer, **errors(404, 409, 429)},
        summary="Cancel a preview, a scheduled expiry, or a running regeneration",
    )
    def post(self, request: AuthenticatedRequest, deletion_id: int) -> Response:
        deletion = services.deletion_cancel(deletion_id=deletion_id, owner_id=request.user.pk)
        return Response(DeletionSerializer(deletion).data)


class DeletionUndoView(APIView):
    throttle_classes = [CostThrottle]
    # The undo preview walks the rewrites' Dep like a dependents query.
    throttle_scopes = {"GET": "dependents", "POST": "deletion_action"}

    @extend_schema(responses={200: UndoPreviewSerializer, **errors(404, 409, 429)}, summary="What an undo would do")
    def get(self, request: AuthenticatedRequest, deletion_id: int) -> Response:
        deletion = selectors.deletion_get(owner=request.user, deletion_id=deletion_id)
        body: dict[str, Any] = {"deletion": deletion.pk, "restores": [], "removes": [], "explanations": {}}
        # Undone already: an undo now does nothing (POST answers the deletion as it is).
        if deletion.status != DeletionRequest.Status.UNDONE:
            services.undo_check(deletion)
            plan = undo_plan(deletion=deletion)
            body |= {
                "restores": plan.restores,
                "removes": plan.removes,
                "explanations": {str(node): path for node, path in plan.explanations.items()},
            }
        return Response(UndoPreviewSerializer(body).data)

    @extend_schema(
        request=None,
        responses={200: DeletionSerializer, **errors(404, 409, 429)},
        summary="Undo an executed soft deletion",
    )
    def post(self, request: AuthenticatedRequest, deletion_id: int) -> Response:
        deletion = services.deletion_undo(deletion_id=deletion_id, owner_id=request.user.pk)
        return Response(DeletionSerializer(deletion).data)


class DeletionResumeView(APIView):
    throttle_classes = [CostThrottle]
    throttle_scopes = {"POST": "deletion_action"}

    @extend_schema(
        request=None,
        responses={200: DeletionSerializer, **errors(404, 409, 429)},
        summary="Run again the failed or cancelled rewrites of a deletion",
    )
    def post(self, request: AuthenticatedRequest, deletion_id: int) -> Response:
        deletion = services.deletion_resume(deletion_id=deletion_id, owner_id=request.user.pk)
        return Response(DeletionSerializer(deletion).data)


class DependentsView(APIView):
    throttle_classes = [CostThrottle]
    throttle_scopes = {"GET": "dependents"}

    @extend_schema(
        parameters=[DependentsQuerySerializer],
        responses={200: DependentsSerializer, **errors(400, 404, 429)},
        summary="Dep(m) minus m: every id, and the nearest with explanation paths",
    )
    def get(self, request: AuthenticatedRequest, message_id: int) -> Response:
        query = validated(DependentsQuerySerializer, request.query_params)
        found = selectors.message_dependents(
            owner=request.user, message_id=message_id, depth=query.get("depth"), paths=query.get("paths")
        )
        body = {
            "root": message_id,
            "dependents": found.items,
            "ids": found.ids,
            "count": found.count,
            "live": selectors.live_count(owner_id=request.user.pk, ids=found.ids),
            "truncated": found.truncated,
        }
        return Response(DependentsSerializer(body).data)


class DependentPathView(APIView):
    throttle_classes = [CostThrottle]
    throttle_scopes = {"GET": "dependents"}

    @extend_schema(
        parameters=[DependentPathQuerySerializer],
        responses={200: DependentPathSerializer, **errors(400, 404, 429)},
        summary="The explanation path of one dependent of m, on demand",
        operation_id="messages_dependent_path_retrieve",
    )
    def get(self, request: AuthenticatedRequest, message_id: int, dependent_id: int) -> Response:
        depth = validated(DependentPathQuerySerializer, request.query_params).get("depth")
        path = selectors.dependent_path(
            owner=request.user, message_id=message_id, dependent_id=dependent_id, depth=depth
        )
        return Response(DependentPathSerializer({"root": message_id, "id": dependent_id, "path": path}).data)


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
        window = selectors.graph_window(
            owner=request.user, max_edges=settings.DELLM_GRAPH_MAX_EDGES, **_window_params(query)
        )
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
        ids = selectors.graph_find(owner=request.user, q=query["q"], **_window_params(query))
        return Response(GraphFindSerializer({"ids": ids}).data)


class ExportView(APIView):
    throttle_classes = [CostThrottle]
    throttle_scopes = {"GET": "export"}

    @extend_schema(responses={200: ExportSerializer, **errors(429)}, summary="All of the caller's data, portable")
    def get(self, request: AuthenticatedRequest) -> StreamingHttpResponse:
        # Streamed in chunks: a history of 100,000 messages never sits in memory
        # as one document (nor as one list of model instances).
        response = StreamingHttpResponse(_export_chunks(owner=request.user), content_type="application/json")
        response["Content-Disposition"] = 'attachment; filename="dellm-export.json"'
        return response


EXPORT_CHUNK = 500


def _json(data: Any) -> str:
    return JSONRenderer().render(data).decode()


def _json_items(items: Iterator[Any]) -> Iterator[str]:
    """A JSON array from chunks of already serialized items."""
    yield "["
    first = True
    for chunk in items:
        if chunk:
            body = _json(chunk)[1:-1]
            yield body if first else "," + body
            first = False
    yield "]"


def _batches(iterable: Iterator[Any]) -> Iterator[list[Any]]:
    while batch := list(islice(iterable, EXPORT_CHUNK)):
        yield batch


def _export_chunks(*, owner: User) -> Iterator[str]:
    """The export document of API.md (ExportSerializer's shape), a chunk at a time."""
    head = {"exported_at": timezone.now(), "username": owner.get_username()}
    yield _json(head)[:-1]
    yield ',"threads":' + _json(ThreadSerializer(chat_selectors.thread_list(owner=owner), many=True).data)
    messages = chat_selectors.message_list(owner=owner)
    yield ',"messages":'
    yield from _json_items(
        MessageSerializer(chat_selectors.with_edges(batch), many=True).data
        for batch in _batches(messages.iterator(chunk_size=EXPORT_CHUNK))
    )
    yield ',"edges":'
    edges = selectors.graph_edges(owner=owner, nodes=messages)
    yield from _json_items(
        ExportEdgeSerializer(batch, many=True).data for batch in _batches(edges.iterator(chunk_size=EXPORT_CHUNK))
    )
    yield ',"deletions":'
    deletions = selectors.deletion_list(owner=owner)
    yield from _json_items(
        DeletionSerializer(batch, many=True).data for batch in _batches(deletions.iterator(chunk_size=EXPORT_CHUNK))
    )
    yield "}"
