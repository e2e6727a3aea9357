"""A message's dependents, and the path that explains one (docs/API.md, "Dependents")."""

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.handler import errors, validated
from core.api.throttles import CostThrottle
from core.types import AuthenticatedRequest
from provenance.api.serializers.dependents import (
    DependentPathQuerySerializer,
    DependentPathSerializer,
    DependentsQuerySerializer,
    DependentsSerializer,
)
from provenance.dependents import dependent_path, message_dependents
from provenance.graph import live_count


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
        found = message_dependents(
            owner=request.user, message_id=message_id, depth=query.get("depth"), paths=query.get("paths")
        )
        body = {
            "root": message_id,
            "dependents": found.items,
            "ids": found.ids,
            "count": found.count,
            "live": live_count(owner_id=request.user.pk, ids=found.ids),
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
        path = dependent_path(owner=request.user, message_id=message_id, dependent_id=dependent_id, depth=depth)
        return Response(DependentPathSerializer({"root": message_id, "id": dependent_id, "path": path}).data)
