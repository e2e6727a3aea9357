"""Rate limits of the API: a scoped throttle per costly endpoint, and the anonymous client's by address."""

from typing import Any

from rest_framework.request import Request
from rest_framework.throttling import ScopedRateThrottle, SimpleRateThrottle

from core.auth.sign_in import client_address


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


class ClientAddressThrottle(ScopedRateThrottle):
    """A scoped rate per client address, as `client_address` finds it (X-Forwarded-For only behind trusted proxies)."""

    def get_ident(self, request: Request) -> str:
        return client_address(request._request) or ""
