"""The caller's account: what erasing it would take, and its erasure (docs/API.md, "Account")."""

from django.contrib.auth import logout
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.fields import StrictCharField
from core.api.handler import errors, validated
from core.api.throttles import CostThrottle
from core.types import AuthenticatedRequest
from provenance.erasure.account import account_erase, account_summary
from provenance.models import AccountErasure


class AccountSerializer(serializers.Serializer):
    username = serializers.CharField()
    threads = serializers.IntegerField()
    messages = serializers.IntegerField()
    deletions = serializers.IntegerField()
    imports = serializers.IntegerField()
    tokens = serializers.IntegerField(help_text="API and agent tokens, every one revoked by the erasure.")


class AccountEraseInputSerializer(serializers.Serializer):
    username = StrictCharField(max_length=150, help_text="The account's username, typed to confirm.")


class AccountErasureSerializer(serializers.ModelSerializer):
    class Meta:
        model = AccountErasure
        fields = ["id", "owner_id", "counts", "created_at"]


class AccountView(APIView):
    @extend_schema(responses={200: AccountSerializer, **errors()}, summary="Your account: what erasing it takes")
    def get(self, request: AuthenticatedRequest) -> Response:
        summary = account_summary(owner=request.user)
        return Response(AccountSerializer({"username": request.user.get_username(), **summary}).data)


class AccountEraseView(APIView):
    throttle_classes = [CostThrottle]
    throttle_scopes = {"POST": "deletion_action"}

    @extend_schema(
        request=AccountEraseInputSerializer,
        responses={200: AccountErasureSerializer, **errors(400, 415, 429)},
        summary="Erase your account and everything in it (not undoable)",
    )
    def post(self, request: AuthenticatedRequest) -> Response:
        data = validated(AccountEraseInputSerializer, request.data)
        user = request.user
        erasure = account_erase(owner=user, actor=user, confirm=data["username"])
        logout(request._request)  # the session goes with the account (tokens went with the user row)
        return Response(AccountErasureSerializer(erasure).data)
