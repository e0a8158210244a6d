"""Usage records: the usage of two requests made for one call."""

from __future__ import annotations

from rlmnb._ground.usage import CallUsage


def test_two_requests_add_up() -> None:
    total = CallUsage(10, 2, 0.5, cached=False) + CallUsage(5, 1, 0.25, cached=False)
    assert total == CallUsage(15, 3, 0.75, cached=False)


def test_an_unpriced_request_makes_the_sum_unpriced() -> None:
    assert (CallUsage(1, 1, 0.1) + CallUsage(1, 1, None)).cost_usd is None
    assert (CallUsage(1, 1, None) + CallUsage(1, 1, 0.1)).cost_usd is None


def test_cached_only_when_both_were() -> None:
    assert (CallUsage(cached=True) + CallUsage(cached=True)).cached
    assert not (CallUsage(cached=True) + CallUsage(cached=False)).cached
