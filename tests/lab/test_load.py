"""The smoke variant of the load benchmarks (`dellm_bench --only streams,soak`): tiny scale, real processes."""

import pytest
from django.contrib.auth import get_user_model

from lab.bench.load import USER_PREFIX, soak_bench, streams_bench

pytestmark = pytest.mark.worker


def test_streams_bench_opens_and_finishes_every_stream(transactional_db):
    result = streams_bench(streams=6, users=2, pool=2, wait=60)

    assert (result["streams"], result["opened"], result["delivered"], result["failed_streams"]) == (6, 6, 6, 0)
    assert result["warm_up_delivered"] == 1
    assert 1 <= result["db_connections_peak"] <= 2
    assert result["errors"] == {}
    assert not get_user_model().objects.filter(username__startswith=USER_PREFIX).exists()


def test_soak_bench_finishes_every_turn_without_server_errors(transactional_db):
    result = soak_bench(users=3, turns=2, web_pool=4, worker_concurrency=1, worker_pool=2)

    assert result["server_errors"] == 0
    assert result["unfinished_turns"] == 0
    assert sum(result["turns"].values()) == 6
    assert sum(result["stream_outcomes"].values()) == 6
    assert (result["i1_violations"], result["users_checked_for_i1"]) == (0, 3)
    assert result["db_connections_peak"]["web"] <= 4
    assert result["db_connections_peak"]["worker"] <= 2
    assert not get_user_model().objects.filter(username__startswith=USER_PREFIX).exists()
