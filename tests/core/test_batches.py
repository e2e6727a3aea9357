import itertools

from hypothesis import given
from hypothesis import strategies as st

from core.batches import bounded_batches

_weights = st.lists(st.tuples(st.integers(0, 12), st.integers(0, 12)), max_size=40)


@given(items=_weights, limits=st.tuples(st.integers(1, 15), st.integers(1, 15)))
def test_runs_keep_the_order_stay_within_the_limits_and_end_only_where_the_next_item_would_not_fit(items, limits):
    runs = list(bounded_batches(items, weigh=lambda item: item, limits=limits))
    assert [item for run in runs for item in run] == items
    assert all(run for run in runs)
    for run in runs:
        sums = [sum(item[i] for item in run) for i in range(2)]
        assert len(run) == 1 or all(total <= limit for total, limit in zip(sums, limits, strict=True))
    for run, following in itertools.pairwise(runs):
        sums = [sum(item[i] for item in run) + following[0][i] for i in range(2)]
        assert any(total > limit for total, limit in zip(sums, limits, strict=True))
