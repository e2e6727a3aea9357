"""`/api/agent-tokens/`: the user lists, makes and revokes the tokens their MCP clients hold (docs/API.md)."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from assistant.mcp.tokens import NAME_MAX, agent_token_create, agent_token_list, agent_token_revoke
from assistant.models import AgentToken
from core.api.fields import StrictCharField
from core.api.handler import errors, validated
from core.api.pagination import LinkHeaderPagination
from core.api.throttles import CostThrottle
from core.types import AuthenticatedRequest


class AgentTokenSerializer(serializers.ModelSerializer):
    class Meta:
        model = AgentToken
        fields = ["id", "name", "created_at"]


class AgentTokenCreatedSerializer(AgentTokenSerializer):
    token = serializers.SerializerMethodField(
        help_text="The secret, shown this once: give it to the MCP client as `Authorization: Bearer <token>`."
    )

    class Meta(AgentTokenSerializer.Meta):
        fields = [*AgentTokenSerializer.Meta.fields, "token"]

    def get_token(self, agent: AgentToken) -> str:
        return str(self.context["secret"])


class AgentTokenInputSerializer(serializers.Serializer):
    name = StrictCharField(max_length=NAME_MAX, help_text='Which agent holds it, for your eyes ("Claude Desktop").')


class AgentTokenListView(APIView):
    """Your agent tokens (newest first), and a new one."""

    throttle_classes = [CostThrottle]
    throttle_scopes = {"POST": "deletion_action"}

    @extend_schema(responses={200: AgentTokenSerializer(many=True), **errors()}, summary="List your agent tokens")
    def get(self, request: AuthenticatedRequest) -> Response:
        paginator = LinkHeaderPagination()
        page = paginator.paginate_queryset(agent_token_list(owner=request.user), request, view=self)
        return paginator.get_paginated_response(AgentTokenSerializer(page, many=True).data)

    @extend_schema(
        request=AgentTokenInputSerializer,
        responses={201: AgentTokenCreatedSerializer, **errors(400, 409, 415, 429)},
        summary="Make an agent token (it opens /mcp only)",
    )
    def post(self, request: AuthenticatedRequest) -> Response:
        data = validated(AgentTokenInputSerializer, request.data)
        agent, secret = agent_token_create(owner=request.user, name=data["name"])
        body = AgentTokenCreatedSerializer(agent, context={"secret": secret}).data
        return Response(body, status=status.HTTP_201_CREATED)


class AgentTokenDetailView(APIView):
    throttle_classes = [CostThrottle]
    throttle_scopes = {"DELETE": "deletion_action"}

    @extend_schema(responses={204: None, **errors(404, 429)}, summary="Revoke an agent token")
    def delete(self, request: AuthenticatedRequest, token_id: int) -> Response:
        agent_token_revoke(owner_id=request.user.pk, token_id=token_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
