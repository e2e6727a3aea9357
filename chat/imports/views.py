"""HTTP API for imports of other tools' chat histories (docs/IMPORT.md)."""

from __future__ import annotations

from typing import Any, cast

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.parsers import MultiPartParser
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle, ScopedRateThrottle
from rest_framework.views import APIView

from chat.imports.history import PayloadTooLarge
from chat.imports.jobs import import_job_create, import_job_get, import_job_list
from chat.imports.stream import import_event_stream
from chat.models import ImportJob
from chat.serializers import ImportInputSerializer, ImportJobSerializer
from core.api.async_auth import authenticate
from core.api.handler import errors
from core.api.pagination import Pagination
from core.streams.endpoint import on_db_briefly, owned_event_stream
from core.streams.sse import EventStreamRenderer

# Multipart framing around the file: the Content-Length check allows for it.
_MULTIPART_SLACK = 64 * 1024


class ImportListView(generics.ListAPIView):
    serializer_class = ImportJobSerializer
    pagination_class = Pagination
    parser_classes = [MultiPartParser]
    throttle_scope = "import"

    def get_throttles(self) -> list[BaseThrottle]:
        # Uploads are costly; reading the list is not.
        return [ScopedRateThrottle()] if self.request.method == "POST" else []

    def get_queryset(self) -> QuerySet[ImportJob]:
        return import_job_list(owner=self.request.user)

    @extend_schema(responses={200: ImportJobSerializer(many=True), **errors(400, 404)}, summary="The caller's imports")
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        request={"multipart/form-data": ImportInputSerializer},
        responses={
            202: OpenApiResponse(ImportJobSerializer, description="Accepted; follow it at /api/imports/{id}/events/."),
            413: OpenApiResponse(
                description="The file is larger than DELLM_IMPORT_MAX_BYTES, or than the caller's quotas take "
                "(quota_exceeded, DELLM_QUOTA_MESSAGES*)."
            ),
            **errors(400, 415, 429),
        },
        summary="Upload a chat history to import",
    )
    def post(self, request: Request) -> Response:
        length = request.META.get("CONTENT_LENGTH") or "0"
        if length.isdigit() and int(length) > settings.DELLM_IMPORT_MAX_BYTES + _MULTIPART_SLACK:
            # Refused before the body is read.
            raise PayloadTooLarge(
                f"The file is larger than {settings.DELLM_IMPORT_MAX_BYTES} bytes.", fields={"file": "too large"}
            )
        serializer = ImportInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        upload = serializer.validated_data["file"]
        if upload.size > settings.DELLM_IMPORT_MAX_BYTES:
            raise PayloadTooLarge(
                f"The file is larger than {settings.DELLM_IMPORT_MAX_BYTES} bytes.", fields={"file": "too large"}
            )
        job = import_job_create(
            owner=request.user,
            data=upload,
            filename=upload.name or "",
            format=serializer.validated_data.get("format"),
        )
        return Response(ImportJobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class ImportDetailView(generics.GenericAPIView):
    @extend_schema(responses={200: ImportJobSerializer, **errors(404)}, summary="One import: status, counts, errors")
    def get(self, request: Request, job_id: int) -> Response:
        return Response(ImportJobSerializer(import_job_get(owner=request.user, job_id=job_id)).data)


@on_db_briefly
def _owner_of(request: HttpRequest, job_id: int) -> User:
    user = cast(User, authenticate(request))
    import_job_get(owner=user, job_id=job_id)
    return user


@on_db_briefly
def _job_state(owner: User, job_id: int) -> tuple[str, dict[str, Any]]:
    job = import_job_get(owner=owner, job_id=job_id)
    return job.status, dict(ImportJobSerializer(job).data)


async def import_events(request: HttpRequest, job_id: int) -> HttpResponseBase:
    """An async view, like the turn stream's: no thread or database connection while it waits."""
    return await owned_event_stream(
        request,
        what="import",
        owner_of=lambda request: _owner_of(request, job_id),
        events=lambda owner: import_event_stream(
            job_id=job_id,
            load=lambda: _job_state(owner, job_id),
            timeout=settings.DELLM_SSE_TIMEOUT,
            recheck=settings.DELLM_SSE_RECHECK,
        ),
    )


class ImportEventsSchema(APIView):
    """The OpenAPI description of `import_events` (drf-spectacular reads views' classes; this one never runs)."""

    renderer_classes = [JSONRenderer, EventStreamRenderer]

    @extend_schema(
        responses={
            (200, "text/event-stream"): OpenApiResponse(
                OpenApiTypes.STR,
                description="`progress` (the import's JSON, when its counts change), then `done` or `failed`; "
                "`timeout` after DELLM_SSE_TIMEOUT seconds.",
            ),
            **errors(404, 429),
        },
        summary="An import's progress as Server-Sent Events",
        description="At most DELLM_MAX_STREAMS_PER_USER streams (turn and import streams together) per user "
        "are open at once (429 beyond).",
    )
    def get(self, request: Request, job_id: int) -> None:
        raise NotImplementedError  # served by chat.imports.views.import_events


import_events.cls = ImportEventsSchema  # type: ignore[attr-defined]
import_events.initkwargs = {}  # type: ignore[attr-defined]
