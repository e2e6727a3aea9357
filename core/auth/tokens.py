"""API tokens and sign-in protection.

Tokens are django-rest-knox tokens: stored as a SHA-512 digest (the admin can
list them, nobody can read one back), expiring after `DELLM_TOKEN_TTL_HOURS`,
revoked by sign-out and by any password change. Failed sign-ins, on the
sign-in page, the admin login and `POST /api/auth/token/` alike, are counted by
django-axes, which locks the username out for a cool-off period."""

from typing import Any

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from knox.models import AuthToken
from rest_framework import exceptions
from rest_framework.authentication import get_authorization_header
from rest_framework.request import Request

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
    # Sign-in tokens expire; a token without expiry is an agent's, which only its user revokes.
    signed_in = AuthToken.objects.filter(user_id=user.pk, expiry__isnull=False)
    keep = signed_in.order_by("-created", "-pk")[: settings.DELLM_TOKEN_LIMIT_PER_USER]
    signed_in.exclude(pk__in=list(keep.values_list("pk", flat=True))).delete()
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


class TokenScheme(OpenApiAuthenticationExtension):
    """The OpenAPI security scheme of `TokenAuthentication` (the name drf-spectacular gave DRF's token auth)."""

    target_class = "core.auth.tokens.TokenAuthentication"
    match_subclasses = True
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": 'A token from POST /api/auth/token/, sent as "Token <token>" or "Bearer <token>".',
        }
