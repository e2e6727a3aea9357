"""Taking units of a user's rate-limited budget from inside a service.

A view's throttle (`core.api.throttles.CostThrottle`, the `/v1` completion
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
        most, duration = self.parse_rate(self.rate)
        assert most is not None and duration is not None  # a rate was given
        # The same key as ScopedRateThrottle's for a signed-in user.
        key = self.cache_format % {"scope": self.scope, "ident": user_id}
        history: list[float] = cache.get(key, [])
        now = self.timer()
        while history and history[-1] <= now - duration:
            history.pop()
        taken = max(0, min(wanted, most - len(history)))
        if not taken:
            # The oldest unit in the window frees first.
            return 0, duration - (now - history[-1]) if history else None
        # Like DRF, a read then a write: two requests at once may both take the
        # last units (the throttles accept the same race).
        history[:0] = [now] * taken
        cache.set(key, history, duration)
        return taken, None


def budget_take(*, user_id: int, scope: str, wanted: int) -> tuple[int, float | None]:
    """Take up to `wanted` units of `scope` (a DEFAULT_THROTTLE_RATES name) for the user.

    Returns how many were taken and, when none was left, the seconds until one
    is.
    """
    if wanted <= 0:
        return 0, None
    return _Budget(scope).take(user_id=user_id, wanted=wanted)
