"""The regeneration bench runs end to end (a few replies; the timing itself belongs to `make bench`)."""

import pytest

from chat.models import Message
from lab.bench.regeneration import regeneration_bench


@pytest.mark.django_db(transaction=True)
def test_regeneration_bench_rewrites_every_derived_reply_and_cleans_up():
    result = regeneration_bench(replies=3)
    assert {k: result[k] for k in ("replies", "planned", "rewritten", "receipt_passed", "taint_violations")} == {
        "replies": 3,
        "planned": 3,
        "rewritten": 3,
        "receipt_passed": True,
        "taint_violations": 0,
    }
    assert not Message.objects.exists()
