"""API tokens and sign-in protection (issue 13, findings 2 and 8).

Tokens are django-rest-knox tokens: stored as a SHA-512 digest (the admin can
list them, nobody can read one back), expiring after `DELLM_TOKEN_TTL_HOURS`,
revoked by sign-out and by any password change. Failed sign-ins, on the
sign-in page, the admin login and `POST /api/auth/token/` alike, are counted by
django-axes, which locks the username out for a cool-off period.
"""

import ipaddress
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username, get_cool_off
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from knox.models import AuthToken
from rest_framework import exceptions
from rest_framework.authentication import get_authorization_header
from rest_framework.request import Request

# Checking a password costs PBKDF2's iterations of CPU (a few hundred ms on two
# cores) while the request holds a pooled database connection (django-axes and
# the user lookup come first). A burst of sign-ins, as when every client comes
# back at once, held the whole pool hashing and left the other requests (and
# most sign-ins) to 503 (found by `dellm_bench --parts soak`: 30 of 50 sign-ins
# at once). At most DELLM_SIGN_IN_CONCURRENCY per process check a password at a
# time; the others wait, holding no connection, at most DELLM_SIGN_IN_WAIT s.
_password_checks = threading.BoundedSemaphore(settings.DELLM_SIGN_IN_CONCURRENCY)


@contextmanager
def password_check_slot() -> Iterator[bool]:
    """Whether this sign-in may check its password now (False: it waited DELLM_SIGN_IN_WAIT in vain)."""
    admitted = _password_checks.acquire(timeout=settings.DELLM_SIGN_IN_WAIT)
    try:
        yield admitted
    finally:
        if admitted:
            _password_checks.release()


# `Authorization: Token <t>` is DeLLM's documented scheme (API.md); `Bearer <t>`
# is what OpenAI-compatible clients send, with the same token.
KEYWORDS = (b"token", b"bearer")


class TokenAuthentication(KnoxTokenAuthentication):
    """Knox's hashed, expiring tokens under either keyword, `Token` or `Bearer`."""

    def authenticate(self, request: Request) -> tuple[Any, AuthToken] | None:
        auth = get_authorization_header(request).split()
        if not auth or auth[0].lower() not in KEYWORDS:
            return None  # another scheme, or none: the next authentication class decides
        if len(auth) != 2:
            raise exceptions.AuthenticationFailed("Invalid token header: send `Token <token>` or `Bearer <token>`.")
        return self.authenticate_credentials(auth[1])

    def authenticate_credentials(self, token: bytes) -> tuple[Any, AuthToken]:
        # Knox decodes the token as UTF-8 and fails on other bytes; a token is ASCII, anything else is not one.
        if not token.isascii():
            raise exceptions.AuthenticationFailed("Invalid token.")
        return super().authenticate_credentials(token)

    def _cleanup_token(self, auth_token: AuthToken) -> bool:
        # Knox also loads and prunes every other token of the user on each
        # request (one more query per API call); an expired token is refused
        # here and pruned at the next sign-in (token_create), which is enough.
        if auth_token.expiry is not None and auth_token.expiry < timezone.now():
            auth_token.delete()
            return True
        return False


def token_create(*, user: AbstractBaseUser) -> tuple[AuthToken, str]:
    """A new API token for `user`: the stored row and the only copy of its secret.

    Prunes the user's expired tokens, and the oldest beyond
    DELLM_TOKEN_LIMIT_PER_USER, so a user's tokens stay a bounded list.
    """
    AuthToken.objects.filter(user_id=user.pk, expiry__lt=timezone.now()).delete()
    created = AuthToken.objects.create(user=user)
    keep = AuthToken.objects.filter(user_id=user.pk).order_by("-created", "-pk")[: settings.DELLM_TOKEN_LIMIT_PER_USER]
    AuthToken.objects.filter(user_id=user.pk).exclude(pk__in=list(keep.values_list("pk", flat=True))).delete()
    return created


class RevokeTokensOnPasswordChange:
    """Signs out every API token of a user whose password changes.

    Django calls `password_changed()` of each entry of AUTH_PASSWORD_VALIDATORS
    from `AbstractBaseUser.save()` after `set_password()`, on every path that
    changes a password (the admin, the password-change page, `changepassword`,
    code): the one hook they all share. It validates nothing.
    """

    def validate(self, password: str, user: AbstractBaseUser | None = None) -> None:
        return None

    def password_changed(self, password: str, user: AbstractBaseUser | None = None) -> None:
        if user is not None and user.pk is not None:
            AuthToken.objects.filter(user_id=user.pk).delete()

    def get_help_text(self) -> str:
        return ""


def client_address(request: HttpRequest) -> str | None:
    """The address of the client: REMOTE_ADDR, or behind DELLM_TRUSTED_PROXIES proxies the one the outermost saw.

    Each trusted proxy appends the address it saw to X-Forwarded-For, so the
    client's is the Nth from the right; what stands left of it the client
    wrote itself. A shorter chain gives its leftmost entry (DRF's NUM_PROXIES
    rule, so the lock-out and the throttles agree); a value that is not an
    address gives REMOTE_ADDR (the lock-out stores addresses as `inet`).
    """
    remote = request.META.get("REMOTE_ADDR")
    proxies = settings.DELLM_TRUSTED_PROXIES
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if proxies <= 0 or not forwarded.strip():
        return remote
    hops = forwarded.split(",")
    candidate = hops[-min(proxies, len(hops))].strip()
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        return remote


class AttemptHandler(AxesDatabaseHandler):
    """django-axes' database handler, less the reset on success that let an attacker unlock their victim.

    Axes' reset deletes the failures matching the successful sign-in by any
    lock-out parameter, with ours (username, address) every failure from the
    same address, whatever username it named. Here a success forgets the
    failures of the username that signed in, from every address, and nothing
    else: that user proved the password, and an address's failures against
    other usernames keep counting towards its lock-out.
    """

    def reset_user_attempts(self, request: HttpRequest, credentials: dict | None = None) -> int:
        username = get_client_username(request, credentials)
        count, _ = AccessAttempt.objects.filter(username=username).delete()
        return count


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials: dict | None = None
) -> HttpResponse:
    """django-axes' answer to a locked-out sign-in: JSON under /api/, a page elsewhere (429 both)."""
    cool_off = get_cool_off(request)
    minutes = max(1, int(cool_off.total_seconds() // 60)) if isinstance(cool_off, timedelta) else None
    wait = f"in {minutes} minute{'s' if minutes != 1 else ''}" if minutes else "later"
    message = f"Too many failed sign-ins for this account; try again {wait}."
    headers = {"Retry-After": str(int(cool_off.total_seconds()))} if isinstance(cool_off, timedelta) else {}
    if request.path.startswith("/api/"):
        from dellm_site.api import error_body

        return JsonResponse(error_body("locked_out", message), status=429, headers=headers)
    response = render(request, "registration/locked_out.html", {"message": message}, status=429)
    for name, value in headers.items():
        response[name] = value
    return response


class TokenScheme(OpenApiAuthenticationExtension):
    """The OpenAPI security scheme of `TokenAuthentication` (the name drf-spectacular gave DRF's token auth)."""

    target_class = "dellm_site.auth.TokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": 'A token from POST /api/auth/token/, sent as "Token <token>" or "Bearer <token>".',
        }
