"""POST /api/threads/{id}/messages/: a message is a turn (chat), a typed deletion request a preview (provenance).

GET on the same URL is chat's page of the thread's messages (chat.views.ThreadMessageListView).
"""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.response import Response

from chat.selectors import thread_get, with_edges
from chat.serializers import ChatAcceptedSerializer, ChatInputSerializer
from chat.turns.start import turn_create, validate_content
from chat.views import ThreadMessageListView
from core.api.handler import errors, validated
from core.api.throttles import CostThrottle
from core.types import AuthenticatedRequest
from provenance.api.serializers.deletions import ChatDeletionSerializer
from provenance.deletions.facts import related_attach
from provenance.deletions.forget_phrases import TYPED_REQUEST_MODE, parse_deletion_request, resolve_deletion_request
from provenance.deletions.preview import deletion_preview


class ChatView(ThreadMessageListView):
    throttle_classes = [CostThrottle]
    throttle_scopes = {"GET": "thread", "POST": "chat"}

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
        content = validated(ChatInputSerializer, request.data)["content"]
        validate_content(content)
        thread = thread_get(owner=request.user, thread_id=thread_id)
        if parse_deletion_request(content) is not None:
            deletion = deletion_preview(
                owner=request.user,
                actor=request.user,
                mode=TYPED_REQUEST_MODE,
                selector="request",
                **resolve_deletion_request(owner=request.user, text=content),
            )
            related_attach(deletion)
            return Response(ChatDeletionSerializer({"deletion": deletion}).data, status=status.HTTP_200_OK)
        turn = turn_create(thread=thread, content=content)
        [message] = with_edges([turn.user_message])
        body = ChatAcceptedSerializer({"message": message, "turn": turn}).data
        return Response(body, status=status.HTTP_202_ACCEPTED)
