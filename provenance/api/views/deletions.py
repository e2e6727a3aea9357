"""Deletions: list, preview (create), show, confirm, cancel, undo, resume (docs/API.md, "Deletions")."""

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.handler import errors, validated
from core.api.pagination import LinkHeaderPagination
from core.api.throttles import CostThrottle
from core.errors import ValidationFailed
from core.types import AuthenticatedRequest, User
from provenance.api.serializers.deletions import (
    DeletionConfirmSerializer,
    DeletionInputSerializer,
    DeletionListQuerySerializer,
    DeletionSerializer,
    UndoPreviewSerializer,
)
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.expiry import deletion_cancel
from provenance.deletions.facts import related_attach
from provenance.deletions.forget_phrases import resolve_deletion_request
from provenance.deletions.preview import deletion_preview
from provenance.deletions.selectors import deletion_get, deletion_list
from provenance.deletions.undo import deletion_resume, deletion_undo, undo_check
from provenance.models import DeletionRequest
from provenance.regeneration.replies import undo_plan

_SELECTORS = ("ids", "exact", "semantic", "identifier", "words", "subject")


def _selection(*, owner: User, select: dict[str, Any]) -> dict[str, Any]:
    """`deletion_preview` keyword arguments for the body's `select`."""
    if "request" not in select:
        return {key: select[key] for key in (*_SELECTORS, "threshold") if key in select}
    if any(key in select for key in _SELECTORS):
        raise ValidationFailed(
            "Select messages with exactly one of ids, exact, semantic, identifier, words, subject or request.",
            fields={"select": "one selector"},
        )
    selection = resolve_deletion_request(owner=owner, text=select["request"])
    # A threshold is for a request read by meaning; one resolved by identifier, words or subject needs none.
    if "threshold" in select and "semantic" in selection:
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
        page = paginator.paginate_queryset(deletion_list(owner=request.user), request, view=self)
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
        deletion = deletion_preview(
            owner=request.user,
            actor=request.user,
            mode=data["mode"],
            depth=data.get("depth"),
            expire_at=data.get("expire_at"),
            derived=data.get("derived"),
            **_selection(owner=request.user, select=data["select"]),
        )
        related_attach(deletion)
        return Response(DeletionSerializer(deletion).data, status=status.HTTP_201_CREATED)


class DeletionDetailView(APIView):
    @extend_schema(responses={200: DeletionSerializer, **errors(404)}, summary="One deletion")
    def get(self, request: AuthenticatedRequest, deletion_id: int) -> Response:
        return Response(DeletionSerializer(deletion_get(owner=request.user, deletion_id=deletion_id)).data)


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
        deletion = deletion_confirm(
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
        deletion = deletion_cancel(deletion_id=deletion_id, owner_id=request.user.pk)
        return Response(DeletionSerializer(deletion).data)


class DeletionUndoView(APIView):
    throttle_classes = [CostThrottle]
    # The undo preview walks the rewrites' Dep like a dependents query.
    throttle_scopes = {"GET": "dependents", "POST": "deletion_action"}

    @extend_schema(responses={200: UndoPreviewSerializer, **errors(404, 409, 429)}, summary="What an undo would do")
    def get(self, request: AuthenticatedRequest, deletion_id: int) -> Response:
        deletion = deletion_get(owner=request.user, deletion_id=deletion_id)
        body: dict[str, Any] = {"deletion": deletion.pk, "restores": [], "removes": [], "explanations": {}}
        # Undone already: an undo now does nothing (POST answers the deletion as it is).
        if deletion.status != DeletionRequest.Status.UNDONE:
            undo_check(deletion)
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
        deletion = deletion_undo(deletion_id=deletion_id, owner_id=request.user.pk)
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
        deletion = deletion_resume(deletion_id=deletion_id, owner_id=request.user.pk)
        return Response(DeletionSerializer(deletion).data)
