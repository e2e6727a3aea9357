"""Taking units of a user's rate-limited budget from inside a service.

A view's throttle (`dellm_site.api.CostThrottle`, the `/v1` completion
throttle) takes one unit per request. Some requests cost more than one unit
and only the service knows how many: a deletion preview that asks the model
for its redactions makes one model call per redaction, and each counts like a
chat message. `budget_take` takes them from the same counter the throttles
use (DRF's history of timestamps under `throttle_<scope>_<user id>` in the
shared cache), so every way in spends one budget.
"""

from django.core.cache import cache
from rest_framework.throttling import SimpleRateThrottle


class _Budget(SimpleRateThrottle):
    """DRF's sliding window for one scope, read and written for a user id rather than a request."""

    def __init__(self, scope: str) -> None:
        self.scope = scope
        super().__init__()

    def take(self, *, user_id: int, wanted: int) -> tuple[int, float | None]:
        if self.rate is None:
            return wanted, None
        # The same key as ScopedRateThrottle's for a signed-in user.
        self.key = self.cache_format % {"scope": self.scope, "ident": user_id}
        self.history = cache.get(self.key, [])
        self.now = self.timer()
        while self.history and self.history[-1] <= self.now - self.duration:
            self.history.pop()
        taken = max(0, min(wanted, self.num_requests - len(self.history)))
        if not taken:
            return 0, self.wait()
        # Like DRF, a read then a write: two requests at once may both take the
        # last units (the throttles accept the same race).
        self.history[:0] = [self.now] * taken
        cache.set(self.key, self.history, self.duration)
        return taken, None


def budget_take(*, user_id: int, scope: str, wanted: int) -> tuple[int, float | None]:
    """Take up to `wanted` units of `scope` (a DEFAULT_THROTTLE_RATES name) for the user.

    Returns how many were taken and, when none was left, the seconds until one
    is (DRF's `wait`).
    """
    if wanted <= 0:
        return 0, None
    return _Budget(scope).take(user_id=user_id, wanted=wanted)
