"""Signing in for an API token, and signing out of one or all (docs/API.md, "Authentication")."""

from django.contrib.auth import authenticate, user_logged_in
from drf_spectacular.utils import extend_schema
from knox.models import AuthToken
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core import overload
from core.api.handler import errors
from core.api.throttles import ClientAddressThrottle
from core.auth.sign_in import password_check_slot
from core.auth.tokens import token_create
from core.errors import ValidationFailed, error_body


class TokenRequestSerializer(serializers.Serializer):
    # Django's own bound on a username (and the sign-in lock-out's column is 255 wide).
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(style={"input_type": "password"})


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="Send as `Authorization: Token <token>` (or `Bearer <token>`).")
    expiry = serializers.DateTimeField(help_text="When the token stops working; sign in again for a new one.")


class TokenView(APIView):
    """`POST /api/auth/token/`: trade a username and password for an API token.

    The token is shown once (stored hashed), expires after DELLM_TOKEN_TTL_HOURS
    and is revoked by `POST /api/auth/logout/` or a password change. Failed
    attempts count towards django-axes' lock-out of the username (429
    `locked_out`); the endpoint is also rate-limited per client (`auth`).
    """

    authentication_classes: list = []
    permission_classes: list = []
    throttle_classes = [ClientAddressThrottle]
    throttle_scope = "auth"

    @extend_schema(
        request=TokenRequestSerializer,
        responses={200: TokenSerializer, **errors(400, 415, 429)},
        auth=[],
        operation_id="auth_token_create",
    )
    def post(self, request: Request) -> Response:
        credentials = TokenRequestSerializer(data=request.data)
        credentials.is_valid(raise_exception=True)
        with password_check_slot() as admitted:
            if not admitted:
                return Response(
                    error_body("service_unavailable", "Too many sign-ins at once; please try again in a few seconds."),
                    status=503,
                    headers={"Retry-After": str(overload.RETRY_AFTER_SECONDS)},
                )
            # Django's own request: django-axes marks it when the username is locked
            # out, and its middleware then answers 429 (core.auth.sign_in.lockout_response).
            user = authenticate(request._request, **credentials.validated_data)
            if user is None or not user.is_active:
                raise ValidationFailed(
                    "Unable to sign in with those credentials.", fields={"non_field_errors": "invalid credentials"}
                )
            instance, token = token_create(user=user)
        user_logged_in.send(sender=type(user), request=request, user=user)
        return Response({"token": token, "expiry": instance.expiry})


class LogoutView(APIView):
    """`POST /api/auth/logout/`: revoke the token this request carries (204)."""

    @extend_schema(request=None, responses={204: None, **errors()}, operation_id="auth_logout")
    def post(self, request: Request) -> Response:
        if isinstance(request.auth, AuthToken):
            request.auth.delete()
        return Response(status=204)


class LogoutAllView(APIView):
    """`POST /api/auth/logoutall/`: revoke every token of the caller (204)."""

    @extend_schema(request=None, responses={204: None, **errors()}, operation_id="auth_logout_all")
    def post(self, request: Request) -> Response:
        AuthToken.objects.filter(user_id=request.user.pk).delete()
        return Response(status=204)
