"""What a plain Django async view under /api/ needs from DRF: the same authentication and the same JSON errors.

DRF views are synchronous; an endpoint that waits (the turn stream) is a plain
async Django view instead. It authenticates with the configured
`REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"]`, whatever they are (session,
token), and answers errors through the project's DRF exception handler, so a
client cannot tell the two kinds of view apart.
"""

from typing import Any, cast

from django.contrib.auth.base_user import AbstractBaseUser
from django.http import HttpRequest, JsonResponse
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request
from rest_framework.settings import api_settings

from core.api.handler import exception_handler
from core.errors import error_body


def authenticate(request: HttpRequest) -> AbstractBaseUser:
    """The authenticated user of `request`, as a DRF view with IsAuthenticated would find it.

    Raises `AuthenticationFailed` for bad credentials and `NotAuthenticated`
    (with the first authenticator's `WWW-Authenticate` challenge) for none.
    Synchronous: it may read the session or the token table.
    """
    classes = cast(list[type[BaseAuthentication]], api_settings.DEFAULT_AUTHENTICATION_CLASSES)
    authenticators = [auth() for auth in classes]
    drf_request = Request(request, authenticators=authenticators)
    user = drf_request.user
    if user is None or not user.is_authenticated:
        exc = exceptions.NotAuthenticated()
        header = authenticators[0].authenticate_header(drf_request) if authenticators else None
        if header:
            exc.auth_header = header  # type: ignore[attr-defined]
        else:
            exc.status_code = 403
        raise exc
    return user


def error_response(exc: Exception) -> JsonResponse:
    """The JSON error a DRF view would have answered for `exc` (API.md's error shape)."""
    response = exception_handler(exc, {"view": None})
    if response is None:  # not reached: the handler answers everything
        return JsonResponse(
            error_body("server_error", "Something went wrong on our side; please try again."), status=500
        )
    json_response = JsonResponse(response.data, status=response.status_code)
    for name in ("WWW-Authenticate", "Retry-After"):
        if name in response:
            json_response[name] = response[name]
    return json_response


def error(status: int, code: str, message: str, headers: dict[str, Any] | None = None) -> JsonResponse:
    response = JsonResponse(error_body(code, message), status=status)
    for name, value in (headers or {}).items():
        response[name] = str(value)
    return response
