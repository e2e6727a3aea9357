"""HTTP API for deletions, provenance and export. Each view: validate -> one service or selector -> serialize."""

from typing import Any

from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from chat import selectors as chat_selectors
from dellm_site.api import errors
from dellm_site.errors import ValidationFailed
from dellm_site.types import AuthenticatedRequest, User
from provenance import selectors, services
from provenance.regeneration import undo_plan
from provenance.requests import resolve_deletion_request
from provenance.serializers import (
    DeletionConfirmSerializer,
    DeletionInputSerializer,
    DeletionSerializer,
    DependentsQuerySerializer,
    DependentsSerializer,
    ExportSerializer,
    GraphQuerySerializer,
    GraphSerializer,
    UndoPreviewSerializer,
)


def _valid(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


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
    @extend_schema(responses={200: DeletionSerializer(many=True), **errors()}, summary="The caller's deletion history")
    def get(self, request: AuthenticatedRequest) -> Response:
        return Response(DeletionSerializer(selectors.deletion_list(owner=request.user), many=True).data)

    @extend_schema(
        request=DeletionInputSerializer,
        responses={
            201: OpenApiResponse(DeletionSerializer, description="A preview; nothing has changed yet."),
            **errors(400, 404, 415),
        },
        summary="Preview a deletion",
    )
    def post(self, request: AuthenticatedRequest) -> Response:
        data = _valid(DeletionInputSerializer, request.data)
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
    @extend_schema(
        request=DeletionConfirmSerializer,
        responses={200: DeletionSerializer, **errors(400, 404, 409)},
        summary="Confirm a previewed deletion (executes it, or schedules an expiry)",
    )
    def post(self, request: AuthenticatedRequest, deletion_id: int) -> Response:
        data = _valid(DeletionConfirmSerializer, request.data or {})
        deletion = services.deletion_confirm(
            deletion_id=deletion_id,
            owner_id=request.user.pk,
            confirmed_by=request.user,
            derived=data.get("derived"),
            redactions=data.get("redactions"),
        )
        return Response(DeletionSerializer(deletion).data)


class DeletionCancelView(APIView):
    @extend_schema(
        request=None,
        responses={200: DeletionSerializer, **errors(404, 409)},
        summary="Cancel a preview, a scheduled expiry, or a running regeneration",
    )
    def post(self, request: AuthenticatedRequest, deletion_id: int) -> Response:
        deletion = services.deletion_cancel(deletion_id=deletion_id, owner_id=request.user.pk)
        return Response(DeletionSerializer(deletion).data)


class DeletionUndoView(APIView):
    @extend_schema(responses={200: UndoPreviewSerializer, **errors(404)}, summary="What an undo would do")
    def get(self, request: AuthenticatedRequest, deletion_id: int) -> Response:
        deletion = selectors.deletion_get(owner=request.user, deletion_id=deletion_id)
        plan = undo_plan(deletion=deletion)
        body = {
            "deletion": deletion.pk,
            "restores": plan.restores,
            "removes": plan.removes,
            "explanations": {str(node): path for node, path in plan.explanations.items()},
        }
        return Response(UndoPreviewSerializer(body).data)

    @extend_schema(
        request=None,
        responses={200: DeletionSerializer, **errors(404, 409)},
        summary="Undo an executed soft deletion",
    )
    def post(self, request: AuthenticatedRequest, deletion_id: int) -> Response:
        deletion = services.deletion_undo(deletion_id=deletion_id, owner_id=request.user.pk)
        return Response(DeletionSerializer(deletion).data)


class DeletionResumeView(APIView):
    @extend_schema(
        request=None,
        responses={200: DeletionSerializer, **errors(404, 409)},
        summary="Run again the failed or cancelled rewrites of a deletion",
    )
    def post(self, request: AuthenticatedRequest, deletion_id: int) -> Response:
        deletion = services.deletion_resume(deletion_id=deletion_id, owner_id=request.user.pk)
        return Response(DeletionSerializer(deletion).data)


class DependentsView(APIView):
    @extend_schema(
        parameters=[DependentsQuerySerializer],
        responses={200: DependentsSerializer, **errors(400, 404)},
        summary="Dep(m) minus m, with explanation paths",
    )
    def get(self, request: AuthenticatedRequest, message_id: int) -> Response:
        depth = _valid(DependentsQuerySerializer, request.query_params).get("depth")
        dependents = selectors.message_dependents(owner=request.user, message_id=message_id, depth=depth)
        body = {"root": message_id, "dependents": dependents, "count": len(dependents)}
        return Response(DependentsSerializer(body).data)


class GraphView(APIView):
    @extend_schema(
        parameters=[GraphQuerySerializer],
        responses={200: GraphSerializer, **errors(400, 404)},
        summary="The provenance graph as Cytoscape.js elements",
    )
    def get(self, request: AuthenticatedRequest) -> Response:
        query = _valid(GraphQuerySerializer, request.query_params)
        nodes = selectors.graph_nodes(
            owner=request.user, thread_id=query.get("thread"), include_deleted=query["include_deleted"]
        )
        edges = selectors.graph_edges(owner=request.user, nodes=nodes)
        return Response(GraphSerializer({"nodes": nodes, "edges": edges}).data)


class ExportView(APIView):
    @extend_schema(responses={200: ExportSerializer, **errors()}, summary="All of the caller's data, portable")
    def get(self, request: AuthenticatedRequest) -> Response:
        owner = request.user
        messages = chat_selectors.message_list(owner=owner)
        body = {
            "exported_at": timezone.now(),
            "username": owner.get_username(),
            "threads": chat_selectors.thread_list(owner=owner),
            "messages": chat_selectors.with_edges(list(messages)),
            "edges": selectors.graph_edges(owner=owner, nodes=messages),
            "deletions": selectors.deletion_list(owner=owner),
        }
        return Response(ExportSerializer(body).data)
