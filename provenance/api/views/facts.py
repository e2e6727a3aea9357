"""`/api/facts/`: what DeLLM knows about the user, and the user's decisions about it (docs/API.md, "Facts")."""

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chat.facts.decisions import corrected_supersedes, fact_approve, fact_correct, fact_get
from chat.facts.selectors import FactView, fact_detail, fact_list, facts_describe, facts_progress
from chat.models import Message
from core.api.handler import errors, validated
from core.api.pagination import Pagination
from core.api.throttles import CostThrottle
from core.types import AuthenticatedRequest
from provenance.api.serializers.deletions import DeletionSerializer
from provenance.api.serializers.facts import (
    FactCorrectedSerializer,
    FactCorrectSerializer,
    FactDetailSerializer,
    FactProgressSerializer,
    FactSerializer,
)
from provenance.deletions.facts import fact_decline


class FactListView(generics.ListAPIView):
    serializer_class = FactSerializer
    pagination_class = Pagination
    throttle_classes = [CostThrottle]
    throttle_scopes = {"GET": "search"}
    request: AuthenticatedRequest

    def get_queryset(self) -> QuerySet[Message]:
        return fact_list(
            owner_id=self.request.user.pk,
            subject=self.request.query_params.get("subject"),
            state=self.request.query_params.get("state"),
        )

    def paginate_queryset(self, queryset: QuerySet[Message]) -> list[FactView]:  # type: ignore[override]
        page = super().paginate_queryset(queryset)
        assert page is not None  # pagination_class is set
        return facts_describe(owner_id=self.request.user.pk, facts=list(page))

    @extend_schema(
        parameters=[
            OpenApiParameter("subject", str, description="One subject's facts (home, work, pet, ...)."),
            OpenApiParameter("state", str, description="current or superseded."),
        ],
        responses={200: FactSerializer(many=True), **errors(400, 404, 429)},
        summary="The caller's live facts by subject, newest said first, a page at a time",
    )
    def get(self, request: Request) -> Response:
        return super().get(request)


class FactDetailView(APIView):
    throttle_classes = [CostThrottle]
    throttle_scopes = {"GET": "search"}

    @extend_schema(responses={200: FactDetailSerializer, **errors(404, 429)}, summary="One fact and its history")
    def get(self, request: AuthenticatedRequest, fact_id: int) -> Response:
        fact, row = fact_get(owner_id=request.user.pk, fact_id=fact_id)
        view = fact_detail(owner_id=request.user.pk, fact=fact, subject=row.subject)
        return Response(FactDetailSerializer(view).data)


class FactApproveView(APIView):
    throttle_classes = [CostThrottle]
    throttle_scopes = {"POST": "deletion_action"}

    @extend_schema(request=None, responses={200: FactSerializer, **errors(404, 429)}, summary="Approve a fact")
    def post(self, request: AuthenticatedRequest, fact_id: int) -> Response:
        fact_approve(owner_id=request.user.pk, fact_id=fact_id)
        fact, _ = fact_get(owner_id=request.user.pk, fact_id=fact_id)
        [view] = facts_describe(owner_id=request.user.pk, facts=[fact])
        return Response(FactSerializer(view).data)


class FactDeclineView(APIView):
    throttle_classes = [CostThrottle]
    throttle_scopes = {"POST": "deletion_action"}

    @extend_schema(
        request=None,
        responses={200: DeletionSerializer, **errors(404, 409, 429)},
        summary="Decline a fact: removed now (a soft deletion), never drawn again from its sources",
    )
    def post(self, request: AuthenticatedRequest, fact_id: int) -> Response:
        return Response(DeletionSerializer(fact_decline(owner=request.user, fact_id=fact_id)).data)


class FactCorrectView(APIView):
    throttle_classes = [CostThrottle]
    throttle_scopes = {"POST": "chat"}

    @extend_schema(
        request=FactCorrectSerializer,
        responses={201: FactCorrectedSerializer, **errors(400, 404, 415, 429)},
        summary="Correct a fact: your statement, stored, supersedes it",
    )
    def post(self, request: AuthenticatedRequest, fact_id: int) -> Response:
        data = validated(FactCorrectSerializer, request.data)
        _, row = fact_get(owner_id=request.user.pk, fact_id=fact_id)
        new = fact_correct(owner_id=request.user.pk, fact_id=fact_id, text=data["text"])
        # A many-valued subject keeps every fact: the corrected one is declined, or it would stay beside its fix.
        deletion = None if corrected_supersedes(row.subject) else fact_decline(owner=request.user, fact_id=fact_id)
        [view] = facts_describe(owner_id=request.user.pk, facts=[new])
        return Response(FactCorrectedSerializer({"fact": view, "deletion": deletion}).data, status=201)


class FactProgressView(APIView):
    @extend_schema(responses={200: FactProgressSerializer}, summary="How far the extraction of facts is")
    def get(self, request: AuthenticatedRequest) -> Response:
        return Response(FactProgressSerializer(facts_progress(owner_id=request.user.pk)).data)
