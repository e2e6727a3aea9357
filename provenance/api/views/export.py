"""The export: a user's live memory as one streamed JSON document (docs/API.md, "Export")."""

from collections.abc import Iterator
from itertools import islice
from typing import Any

from django.http import StreamingHttpResponse
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.renderers import JSONRenderer
from rest_framework.views import APIView

from chat.models import Fact, Message
from chat.selectors import message_list, thread_list, with_edges
from chat.serializers import ThreadSerializer
from core.api.handler import errors
from core.api.throttles import CostThrottle
from core.types import AuthenticatedRequest, User
from provenance.api.serializers.deletions import (
    DeletionSerializer,
)
from provenance.api.serializers.export import ExportEdgeSerializer, ExportMessageSerializer, ExportSerializer
from provenance.deletions.selectors import deletion_list
from provenance.graph import graph_edges


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


def _subjects(owner: User, batch: list[Message]) -> dict[int, str]:
    """{fact id: its subject} of a batch's facts (one query, none without facts)."""
    facts = [message.pk for message in batch if message.role == Message.Role.FACT]
    if not facts:
        return {}
    return dict(Fact.objects.filter(owner=owner, message_id__in=facts).values_list("message_id", "subject"))


def _export_chunks(*, owner: User) -> Iterator[str]:
    """The export document of API.md (ExportSerializer's shape), a chunk at a time."""
    head = {"exported_at": timezone.now(), "username": owner.get_username()}
    yield _json(head)[:-1]
    # The facts thread too: facts are messages of the export (role `fact`, with their subject and edges).
    yield ',"threads":' + _json(ThreadSerializer(thread_list(owner=owner, with_facts=True), many=True).data)
    messages = message_list(owner=owner)
    yield ',"messages":'
    yield from _json_items(
        ExportMessageSerializer(with_edges(batch), many=True, context={"subjects": _subjects(owner, batch)}).data
        for batch in _batches(messages.iterator(chunk_size=EXPORT_CHUNK))
    )
    yield ',"edges":'
    edges = graph_edges(owner=owner, nodes=messages)
    yield from _json_items(
        ExportEdgeSerializer(batch, many=True).data for batch in _batches(edges.iterator(chunk_size=EXPORT_CHUNK))
    )
    yield ',"deletions":'
    deletions = deletion_list(owner=owner)
    yield from _json_items(
        DeletionSerializer(batch, many=True).data for batch in _batches(deletions.iterator(chunk_size=EXPORT_CHUNK))
    )
    yield "}"
