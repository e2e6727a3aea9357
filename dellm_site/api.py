"""What every API endpoint shares: the JSON error format, pagination, the token view.

Every 4xx/5xx answer under /api/ has the body of API.md:
`{"error": {"code": "...", "message": "a human sentence", "fields": {...}}}`.
"""

import logging
import math
from typing import Any

from django.conf import settings
from django.contrib.auth import authenticate, user_logged_in
from django.core.exceptions import BadRequest, PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from drf_spectacular.utils import OpenApiResponse, extend_schema
from knox.models import AuthToken
from rest_framework import exceptions, serializers
from rest_framework.pagination import CursorPagination, PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle, SimpleRateThrottle
from rest_framework.views import APIView, set_rollback

from dellm_site import overload
from dellm_site.auth import client_address, password_check_slot, token_create
from dellm_site.client_input import whole_number
from dellm_site.errors import DomainError, ValidationFailed

logger = logging.getLogger(__name__)

# DRF's own exception classes, named by the codes clients can switch on.
_CODES = {
    exceptions.ParseError: "malformed_request",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.AuthenticationFailed: "authentication_failed",
    exceptions.PermissionDenied: "permission_denied",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.NotAcceptable: "not_acceptable",
    exceptions.Throttled: "throttled",
}


class PayloadTooLarge(exceptions.APIException):
    status_code = 413
    default_detail = "The request body is larger than this server accepts."
    default_code = "payload_too_large"


def validated(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    """A view's input, validated by `serializer_class` (a 400 in the JSON error shape otherwise)."""
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def error_body(code: str, message: str, fields: dict | None = None) -> dict:
    return {"error": {"code": code, "message": message, "fields": fields or {}}}


def _sentence(text: object) -> str:
    text = str(text).strip()
    return text if text.endswith((".", "?", "!")) else f"{text}."


def _flatten(detail: object, prefix: str = "") -> dict[str, str]:
    """DRF's nested validation detail as {"select.ids": "message"}."""
    if isinstance(detail, dict):
        flat: dict[str, str] = {}
        for key, value in detail.items():
            name = "non_field_errors" if key == "non_field_errors" and not prefix else f"{prefix}{key}"
            flat |= _flatten(value, f"{name}.") if isinstance(value, dict) else {name: _joined(value)}
        return flat
    return {prefix.rstrip(".") or "non_field_errors": _joined(detail)}


def _joined(value: object) -> str:
    if isinstance(value, list):
        return " ".join(_joined(item) for item in value)
    if isinstance(value, dict):
        return " ".join(f"{key}: {_joined(item)}" for key, item in value.items())
    return _sentence(value)


def _validation_response(exc: exceptions.ValidationError) -> Response:
    fields = _flatten(exc.detail) or {"non_field_errors": "Invalid input."}
    name, first = next(iter(fields.items()))
    message = first if name == "non_field_errors" else f"{name}: {first}"
    return Response(error_body("validation_error", message, fields), status=400)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF's exception hook: every error, expected or not, in the format of API.md."""
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(*exc.args)
    elif isinstance(exc, SuspiciousOperation | BadRequest):
        # Django's refusals of a request it will not read (more than DATA_UPLOAD_MAX_NUMBER_FIELDS fields, ...).
        exc = exceptions.ParseError("The request cannot be read: too many fields or files, or malformed.")
    set_rollback()
    if isinstance(exc, DomainError):
        headers = {}
        if exc.retry_after is not None:
            headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
        return Response(error_body(exc.code, exc.message, exc.fields), status=exc.status, headers=headers)
    if isinstance(exc, exceptions.ValidationError):
        return _validation_response(exc)
    if isinstance(exc, exceptions.APIException):
        headers = {}
        if getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = exc.auth_header  # type: ignore[attr-defined]
        if getattr(exc, "wait", None):
            headers["Retry-After"] = str(int(exc.wait))  # type: ignore[attr-defined]
        code = next((c for cls, c in _CODES.items() if isinstance(exc, cls)), exc.default_code)
        detail = exc.detail if isinstance(exc.detail, str) else _joined(exc.detail)
        return Response(error_body(code, _sentence(detail)), status=exc.status_code, headers=headers)
    if overload.database_unavailable(exc):
        overload.log_unavailable(exc, type(context.get("view")).__name__)
        headers = {"Retry-After": str(overload.RETRY_AFTER_SECONDS)}
        return Response(error_body("service_unavailable", overload.MESSAGE), status=503, headers=headers)
    view = context.get("view")
    logger.exception("unhandled error in %s", type(view).__name__ if view else "api view")
    return Response(error_body("server_error", "Something went wrong on our side; please try again."), status=500)


def handler404(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse(error_body("not_found", "There is nothing at this address."), status=404)
    return defaults.page_not_found(request, exception)


def handler500(request: HttpRequest) -> HttpResponse:
    if request.path.startswith("/api/"):
        message = "Something went wrong on our side; please try again."
        return JsonResponse(error_body("server_error", message), status=500)
    return defaults.server_error(request)


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField(help_text="A sentence for humans.")
    # The API names it `fields`, which shadows Serializer.fields for the type checker only.
    fields = serializers.DictField(child=serializers.CharField(), help_text="Per-field problems.")  # type: ignore[assignment]


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()


_ERROR_TEXT = {
    400: "Invalid input.",
    401: "Not authenticated.",
    403: "Forbidden (for example a missing CSRF token with session auth).",
    404: "Not found, or not yours.",
    405: "Method not allowed.",
    409: "Conflicts with the object's current state.",
    415: "Unsupported media type (send JSON).",
    413: "The request body is too large.",
    429: "Too many requests (or, at sign-in, too many failed attempts: `locked_out`).",
    503: "The database is saturated; retry after `Retry-After` seconds.",
}


def errors(*statuses: int) -> dict[int, OpenApiResponse]:
    """The error responses of an endpoint for `extend_schema(responses=...)`.

    401 and 403 apply to every authenticated endpoint, so they are always listed.
    """
    codes = sorted({401, 403, *statuses})
    return {code: OpenApiResponse(ErrorSerializer, description=_ERROR_TEXT[code]) for code in codes}


class Pagination(PageNumberPagination):
    """`?page=` and `?page_size=` (at most DELLM_MAX_PAGE_SIZE: larger asks are refused)."""

    page_size_query_param = "page_size"

    def get_page_size(self, request: Request) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return settings.DELLM_PAGE_SIZE
        limit = settings.DELLM_MAX_PAGE_SIZE
        size = whole_number(raw, digits=len(str(limit)))
        if size is None or not 1 <= size <= limit:
            raise ValidationFailed(
                f"page_size must be a whole number from 1 to {limit}.", fields={"page_size": "out of range"}
            )
        return size

    def get_schema_operation_parameters(self, view: APIView) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"] |= {"minimum": 1, "maximum": settings.DELLM_MAX_PAGE_SIZE}
            if parameter["name"] == self.page_query_param:
                parameter["schema"] |= {"minimum": 1}
        return parameters


class CostThrottle(ScopedRateThrottle):
    """A rate limit per user and scope, the scope chosen per request.

    A view names its scopes by method, `throttle_scopes = {"POST": "deletion_preview"}`
    (a method not named is free), or decides itself with `throttle_scope_for(request)`.
    Counters live in the shared cache (settings.CACHES), so every web process
    counts against the same limit; rates come from DEFAULT_THROTTLE_RATES.
    """

    def allow_request(self, request: Request, view: Any) -> bool:
        if hasattr(view, "throttle_scope_for"):
            scope = view.throttle_scope_for(request)
        else:
            scope = getattr(view, "throttle_scopes", {}).get(request.method)
        if scope is None:
            return True
        self.scope = scope
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return SimpleRateThrottle.allow_request(self, request, view)


class LinkHeaderPagination(Pagination):
    """Pages of a list whose body stays a bare JSON array (API.md's shape for it).

    `?page=` and `?page_size=` as everywhere; the next and previous pages are
    in a `Link` header (rel="next"/"prev", RFC 8288) and the total in
    `X-Total-Count`, so clients that read the array keep working.
    """

    def get_paginated_response(self, data: Any) -> Response:
        links = [
            f'<{url}>; rel="{rel}"'
            for rel, url in (("next", self.get_next_link()), ("prev", self.get_previous_link()))
            if url
        ]
        assert self.page is not None  # paginate_queryset ran first
        headers = {"X-Total-Count": str(self.page.paginator.count)}
        if links:
            headers["Link"] = ", ".join(links)
        return Response(data, headers=headers)

    def get_paginated_response_schema(self, schema: dict) -> dict:
        return schema


class LinkHeaderCursorPagination(CursorPagination):
    """Pages of a long list read by position (`?cursor=`), the body a bare JSON array.

    Keyset pages: each costs the same however deep it is, and a row added
    while a client pages does not shift the pages after it. `?page_size=` as
    everywhere; the next and previous pages are in a `Link` header
    (rel="next"/"prev"). No total: counting would cost what paging saves.
    A subclass sets `ordering`.
    """

    page_size_query_param = "page_size"
    get_page_size = Pagination.get_page_size

    def decode_cursor(self, request: Request) -> Any:
        try:
            cursor = super().decode_cursor(request)
            if cursor is None or self.position_valid(cursor.position):
                return cursor
        except exceptions.NotFound:  # DRF's answer to a cursor it cannot decode
            pass
        raise ValidationFailed(
            "cursor is not one this server gave out; follow the Link header.", fields={"cursor": "invalid"}
        )

    def position_valid(self, position: Any) -> bool:
        """Whether a cursor's position can be compared with the first `ordering` field (a subclass checks)."""
        return True

    def get_paginated_response(self, data: Any) -> Response:
        links = [
            f'<{url}>; rel="{rel}"'
            for rel, url in (("next", self.get_next_link()), ("prev", self.get_previous_link()))
            if url
        ]
        return Response(data, headers={"Link": ", ".join(links)} if links else {})

    def get_paginated_response_schema(self, schema: dict) -> dict:
        return schema


class TokenRequestSerializer(serializers.Serializer):
    # Django's own bound on a username (and the sign-in lock-out's column is 255 wide).
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(style={"input_type": "password"})


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="Send as `Authorization: Token <token>` (or `Bearer <token>`).")
    expiry = serializers.DateTimeField(help_text="When the token stops working; sign in again for a new one.")


class ClientAddressThrottle(ScopedRateThrottle):
    """A scoped rate per client address, as `client_address` finds it (X-Forwarded-For only behind trusted proxies)."""

    def get_ident(self, request: Request) -> str:
        return client_address(request._request) or ""


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
            # out, and its middleware then answers 429 (dellm_site.auth.lockout_response).
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
