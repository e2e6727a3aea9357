"""HTTP API for threads, chat turns and messages. Each view: validate -> one service or selector -> serialize."""

from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chat.agent_memory import agent_access_get, agent_access_set
from chat.models import Message, Thread
from chat.selectors import (
    message_get,
    message_list,
    thread_get,
    thread_list,
    thread_message_list,
    turn_get,
    with_capped_edges,
)
from chat.serializers import (
    AgentAccessSerializer,
    MessageQuerySerializer,
    MessageSerializer,
    ThreadDetailSerializer,
    ThreadInputSerializer,
    ThreadRenameSerializer,
    ThreadSerializer,
    TurnSerializer,
)
from chat.threads import thread_create, thread_rename
from chat.turns.recovery import turn_retry
from core.api.client_input import whole_number
from core.api.handler import errors, validated
from core.api.pagination import LinkHeaderCursorPagination, LinkHeaderPagination, Pagination
from core.api.throttles import CostThrottle
from core.types import AuthenticatedRequest

_PAGE_PARAMETERS = [
    OpenApiParameter("page_size", int, description="At most DELLM_MAX_PAGE_SIZE (default DELLM_PAGE_SIZE)."),
]


class ThreadListView(APIView):
    throttle_classes = [CostThrottle]
    throttle_scopes = {"POST": "thread_create"}

    @extend_schema(
        parameters=[OpenApiParameter("page", int), *_PAGE_PARAMETERS],
        responses={200: ThreadSerializer(many=True), **errors(400, 404)},
        summary="The caller's threads, newest first, a page at a time (Link header)",
    )
    def get(self, request: AuthenticatedRequest) -> Response:
        paginator = LinkHeaderPagination()
        page = paginator.paginate_queryset(thread_list(owner=request.user), request, view=self)
        return paginator.get_paginated_response(ThreadSerializer(page, many=True).data)

    @extend_schema(
        request=ThreadInputSerializer,
        responses={201: ThreadSerializer, **errors(400, 415, 429)},
        summary="Start a thread",
    )
    def post(self, request: AuthenticatedRequest) -> Response:
        data = validated(ThreadInputSerializer, request.data)
        thread = thread_create(owner=request.user, title=data.get("title", ""))
        return Response(ThreadSerializer(thread).data, status=status.HTTP_201_CREATED)


class ThreadMessagePagination(LinkHeaderCursorPagination):
    """A thread's live messages by position, newest first (`chat.selectors.thread_message_list`)."""

    ordering = ("-position", "-seq")

    def position_valid(self, position: Any) -> bool:
        return position is None or whole_number(str(position), digits=18) is not None


def _thread_page(request: AuthenticatedRequest, thread: Thread) -> tuple[ThreadMessagePagination, list[Message]]:
    """The page of the thread's messages that `request` asks for, newest first, edges capped."""
    paginator = ThreadMessagePagination()
    page = paginator.paginate_queryset(thread_message_list(thread=thread), request)
    assert page is not None  # a page size is always set
    # Both answers link to pages of the message list, whichever URL asked.
    paginator.base_url = request.build_absolute_uri(reverse("thread-chat", args=[thread.pk]))
    if "page_size" in request.query_params:
        paginator.base_url += f"?page_size={paginator.page_size}"
    return paginator, with_capped_edges(page, limit=settings.DELLM_PAGE_MAX_EDGES)


class ThreadDetailView(APIView):
    # A page of a long thread joins its messages' edges: limited like the graph, not like a chat turn.
    throttle_classes = [CostThrottle]
    throttle_scopes = {"GET": "thread"}

    @extend_schema(
        parameters=_PAGE_PARAMETERS,
        responses={200: ThreadDetailSerializer, **errors(400, 404, 429)},
        summary="A thread and its newest messages (`messages_next`: the page before them)",
    )
    def get(self, request: AuthenticatedRequest, thread_id: int) -> Response:
        thread = thread_get(owner=request.user, thread_id=thread_id)
        paginator, page = _thread_page(request, thread)
        thread.live_messages = page[::-1]
        thread.messages_next = paginator.get_next_link()
        headers = {"Link": f'<{thread.messages_next}>; rel="next"'} if thread.messages_next else {}
        return Response(ThreadDetailSerializer(thread).data, headers=headers)

    @extend_schema(
        request=ThreadRenameSerializer,
        responses={200: ThreadSerializer, **errors(400, 404, 415)},
        summary="Rename a thread",
    )
    def patch(self, request: AuthenticatedRequest, thread_id: int) -> Response:
        data = validated(ThreadRenameSerializer, request.data)
        thread = thread_get(owner=request.user, thread_id=thread_id)
        thread = thread_rename(owner_id=request.user.pk, thread_id=thread.pk, title=data["title"])
        return Response(ThreadSerializer(thread).data)


class ThreadMessageListView(APIView):
    """`GET /api/threads/{id}/messages/`: the thread's live messages a page at a time, newest first.

    The same URL takes a chat turn by POST (assistant.chat_view.ChatView, which adds it).
    """

    throttle_classes = [CostThrottle]
    throttle_scopes = {"GET": "thread"}

    @extend_schema(
        parameters=[
            OpenApiParameter("cursor", str, description="From the `Link` header or the thread's `messages_next`."),
            *_PAGE_PARAMETERS,
        ],
        responses={200: MessageSerializer(many=True), **errors(400, 404, 429)},
        summary="A thread's messages, newest first, a page at a time (Link header)",
    )
    def get(self, request: AuthenticatedRequest, thread_id: int) -> Response:
        thread = thread_get(owner=request.user, thread_id=thread_id)
        paginator, page = _thread_page(request, thread)
        return paginator.get_paginated_response(MessageSerializer(page, many=True).data)


class TurnDetailView(APIView):
    @extend_schema(responses={200: TurnSerializer, **errors(404)}, summary="A turn's status and reply")
    def get(self, request: AuthenticatedRequest, turn_id: int) -> Response:
        return Response(TurnSerializer(turn_get(owner=request.user, turn_id=turn_id)).data)


class TurnRetryView(APIView):
    # A retry is another LLM call: it counts like a chat message.
    throttle_classes = [CostThrottle]
    throttle_scopes = {"POST": "chat"}

    @extend_schema(
        request=None, responses={200: TurnSerializer, **errors(404, 409, 429)}, summary="Re-run a failed turn"
    )
    def post(self, request: AuthenticatedRequest, turn_id: int) -> Response:
        turn = turn_retry(turn_id=turn_get(owner=request.user, turn_id=turn_id).pk, owner_id=request.user.pk)
        return Response(TurnSerializer(turn_get(owner=request.user, turn_id=turn.pk)).data)


class MessageListView(generics.ListAPIView):
    serializer_class = MessageSerializer
    pagination_class = Pagination
    request: AuthenticatedRequest
    throttle_classes = [CostThrottle]

    def throttle_scope_for(self, request: Request) -> str | None:
        # A full-text search scans the owner's messages; a plain page does not.
        return "search" if request.query_params.get("q") else None

    def get_queryset(self) -> QuerySet[Message]:
        query = validated(MessageQuerySerializer, self.request.query_params)
        return message_list(
            owner=self.request.user, thread_id=query.get("thread"), status=query["status"], q=query["q"]
        )

    def paginate_queryset(self, queryset: QuerySet[Message]) -> list[Message]:  # type: ignore[override]
        page = super().paginate_queryset(queryset)
        assert page is not None  # pagination_class is set
        return with_capped_edges(page, limit=settings.DELLM_PAGE_MAX_EDGES)

    @extend_schema(
        parameters=[MessageQuerySerializer],
        responses={200: MessageSerializer(many=True), **errors(400, 404, 429)},
        summary="The caller's messages",
    )
    def get(self, request: Request) -> Response:
        return super().get(request)


class MessageDetailView(APIView):
    @extend_schema(responses={200: MessageSerializer, **errors(404)}, summary="One message")
    def get(self, request: AuthenticatedRequest, message_id: int) -> Response:
        return Response(MessageSerializer(message_get(owner=request.user, message_id=message_id)).data)


class AgentAccessView(APIView):
    """What the caller lets MCP clients do (README, "Connect an agent (MCP)")."""

    throttle_classes = [CostThrottle]
    throttle_scopes = {"PUT": "deletion_action"}

    @extend_schema(responses={200: AgentAccessSerializer, **errors()}, summary="What agents may do")
    def get(self, request: AuthenticatedRequest) -> Response:
        return Response(AgentAccessSerializer(agent_access_get(owner_id=request.user.pk)).data)

    @extend_schema(
        request=AgentAccessSerializer,
        responses={200: AgentAccessSerializer, **errors(400, 415, 429)},
        summary="Allow or forbid agents to confirm deletions",
    )
    def put(self, request: AuthenticatedRequest) -> Response:
        data = validated(AgentAccessSerializer, request.data)
        access = agent_access_set(owner_id=request.user.pk, **data)
        return Response(AgentAccessSerializer(access).data)
