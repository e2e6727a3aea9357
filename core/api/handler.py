"""The JSON error format of every answer under /api/ (docs/API.md, "Errors"): DRF's handler, 404 and 500."""

import logging
import math
from typing import Any

from django.core.exceptions import BadRequest, PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from drf_spectacular.utils import OpenApiResponse
from rest_framework import exceptions, serializers
from rest_framework.response import Response
from rest_framework.views import set_rollback

from core import overload
from core.errors import DomainError, error_body

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
        # A class may name its own code (`error_code`), else DRF's class decides.
        code = getattr(exc, "error_code", None) or next(
            (c for cls, c in _CODES.items() if isinstance(exc, cls)), exc.default_code
        )
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
