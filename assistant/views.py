"""POST /api/threads/{id}/messages/: a message is a turn (chat), a typed deletion request a preview (provenance)."""

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from chat import selectors, services
from chat.serializers import ChatAcceptedSerializer, ChatInputSerializer
from dellm_site.api import errors
from dellm_site.types import AuthenticatedRequest
from provenance import services as deletions
from provenance.requests import parse_deletion_request, resolve_deletion_request
from provenance.serializers import ChatDeletionSerializer

# A deletion typed in the chat is parsed by rules that can misread; the mode it
# previews is the restorable one. A purge is asked for on /api/deletions/.
CHAT_DELETION_MODE = "soft"


def _valid(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class ChatView(APIView):
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "chat"

    @extend_schema(
        request=ChatInputSerializer,
        responses={
            202: OpenApiResponse(ChatAcceptedSerializer, description="Stored; the reply comes with the turn."),
            200: OpenApiResponse(
                ChatDeletionSerializer,
                description="A deletion request: previewed, not stored as a message. Confirm it to delete.",
            ),
            **errors(400, 404, 415, 429),
        },
        summary="Send a message (or a deletion request) in a thread",
    )
    def post(self, request: AuthenticatedRequest, thread_id: int) -> Response:
        content = _valid(ChatInputSerializer, request.data)["content"]
        services.validate_content(content)
        thread = selectors.thread_get(owner=request.user, thread_id=thread_id)
        if parse_deletion_request(content) is not None:
            deletion = deletions.deletion_preview(
                owner=request.user,
                actor=request.user,
                mode=CHAT_DELETION_MODE,
                selector="request",
                **resolve_deletion_request(owner=request.user, text=content),
            )
            return Response(ChatDeletionSerializer({"deletion": deletion}).data, status=status.HTTP_200_OK)
        turn = services.turn_create(thread=thread, content=content)
        [message] = selectors.with_edges([turn.user_message])
        body = ChatAcceptedSerializer({"message": message, "turn": turn}).data
        return Response(body, status=status.HTTP_202_ACCEPTED)
