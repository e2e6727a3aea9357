"""Cutting a sequence into consecutive runs bounded in several measures at once (a count, characters)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def bounded_batches(
    items: Iterable[T], *, weigh: Callable[[T], tuple[int, ...]], limits: tuple[int, ...]
) -> Iterator[list[T]]:
    """Consecutive runs of `items`, in order, each as long as its summed weights stay within `limits`.

    Greedy: a run ends only where the next item would take a sum past its
    limit. An item heavier than a limit makes a run of its own.
    """
    run: list[T] = []
    totals = [0] * len(limits)
    for item in items:
        weights = weigh(item)
        if run and any(t + w > limit for t, w, limit in zip(totals, weights, limits, strict=True)):
            yield run
            run, totals = [], [0] * len(limits)
        run.append(item)
        totals = [t + w for t, w in zip(totals, weights, strict=True)]
    if run:
        yield run
