"""Sign-in protection: bounded password checks, the client's address, django-axes' lock-out (docs/SECURITY.md)."""

import ipaddress
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username, get_cool_off
from axes.models import AccessAttempt
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

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
        from core.errors import error_body

        return JsonResponse(error_body("locked_out", message), status=429, headers=headers)
    response = render(request, "registration/locked_out.html", {"message": message}, status=429)
    for name, value in headers.items():
        response[name] = value
    return response
