from __future__ import annotations

import asyncio
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmnb._engine.budget import Budget
from rlmnb._ground.config import RLMConfig
from rlmnb._ground.errors import BudgetExhausted
from rlmnb._ground.usage import CallUsage


def make(**kw: object) -> Budget:
    return Budget(RLMConfig(**kw).validate())  # type: ignore[arg-type]


def test_single_call_with_nothing_left_fails_without_spending() -> None:
    b = make(max_llm_calls=1)
    r = b.reserve("r", 1)
    b.settle(r, CallUsage(10, 5))
    with pytest.raises(BudgetExhausted, match="Aggregate what you already have"):
        b.reserve("r", 1)
    assert b.usage().sub_calls == 1 and b.calls_left == 0


def test_batch_that_does_not_fit_fails_whole() -> None:
    b = make(max_llm_calls=5)
    b.reserve("r", 3)
    with pytest.raises(BudgetExhausted, match="batch of 3"):
        b.reserve("r", 3)
    assert b.calls_left == 2  # the failed batch took nothing


def test_release_returns_unsent_slots() -> None:
    b = make(max_llm_calls=4)
    r = b.reserve("r", 4)
    b.settle(r, CallUsage(1, 1))
    b.release(r)
    assert b.calls_left == 3
    assert b.usage().sub_calls == 1


def test_root_calls_are_not_charged_to_sub_call_limit() -> None:
    b = make(max_llm_calls=1)
    r = b.reserve("r", 1, charged=False)
    b.settle(r, CallUsage(100, 10), root=True)
    assert b.calls_left == 1
    u = b.usage()
    assert (u.root_calls, u.sub_calls, u.input_tokens, u.output_tokens) == (1, 0, 100, 10)


def test_token_cap_counts_reserved_estimates() -> None:
    b = make(max_tokens=1000)
    b.reserve("r", 2, est_tokens=800)
    with pytest.raises(BudgetExhausted, match="Token budget"):
        b.reserve("r", 1, est_tokens=300)


def test_cost_cap() -> None:
    b = make(max_cost=0.01)
    r = b.reserve("r", 1)
    b.settle(r, CallUsage(1, 1, cost_usd=0.02))
    with pytest.raises(BudgetExhausted, match="Cost budget"):
        b.reserve("r", 1)


def test_unpriced_calls_are_counted_not_zeroed() -> None:
    b = make()
    r = b.reserve("r", 2)
    b.settle(r, CallUsage(1, 1, cost_usd=None))
    b.settle(r, CallUsage(1, 1, cost_usd=0.5))
    u = b.usage()
    assert u.cost_usd == 0.5 and u.unpriced_calls == 1
    assert "unpriced" in u.cost_text()


def test_time_cap() -> None:
    b = make(max_time=0.001)
    b._started -= 1.0  # the clock says a second has passed
    with pytest.raises(BudgetExhausted, match="Time budget"):
        b.reserve("r", 1)


def test_per_run_usage_sums_to_total() -> None:
    b = make()
    for rid, n in (("a", 2), ("b", 3)):
        r = b.reserve(rid, n)
        for _ in range(n):
            b.settle(r, CallUsage(2, 1))
    assert b.run_usage("a").sub_calls == 2 and b.run_usage("b").sub_calls == 3
    assert b.usage().sub_calls == 5
    assert b.usage({"a"}).input_tokens == 4


def test_two_budgets_never_share_a_counter() -> None:
    a, c = make(max_llm_calls=1), make(max_llm_calls=1)
    a.reserve("x", 1)
    c.reserve("y", 1)  # would fail if the counter were shared
    assert a.calls_left == 0 and c.calls_left == 0


requests = st.lists(st.one_of(st.just(1), st.integers(min_value=2, max_value=12)), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(limit=st.integers(min_value=0, max_value=60), sizes=requests, threads=st.integers(1, 6))
def test_property_threads_never_overdraw_and_counts_are_exact(limit: int, sizes: list[int], threads: int) -> None:
    b = make(max_llm_calls=limit)
    granted: list[int] = []
    refused: list[int] = []
    lock = threading.Lock()
    chunks = [sizes[i::threads] for i in range(threads)]

    def worker(chunk: list[int]) -> None:
        for n in chunk:
            try:
                r = b.reserve("run", n)
            except BudgetExhausted:
                with lock:
                    refused.append(n)
                continue
            for _ in range(n):
                b.settle(r, CallUsage(1, 1))
            with lock:
                granted.append(n)

    ts = [threading.Thread(target=worker, args=(c,)) for c in chunks]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    spent = b.usage().sub_calls
    assert spent == sum(granted) <= limit
    assert sorted(granted + refused) == sorted(sizes)
    assert b.calls_left == limit - spent
    # a refused request really did not fit at some point: it was larger than what is left now
    assert all(n > b.calls_left for n in refused)


@settings(max_examples=40, deadline=None)
@given(limit=st.integers(min_value=0, max_value=40), sizes=requests)
def test_property_asyncio_batches_all_or_nothing(limit: int, sizes: list[int]) -> None:
    b = make(max_llm_calls=limit)

    async def call(n: int) -> int:
        try:
            r = b.reserve("run", n)
        except BudgetExhausted:
            return 0

        async def one() -> None:
            await asyncio.sleep(0)
            b.settle(r, CallUsage(3, 2))

        await asyncio.gather(*(one() for _ in range(n)))
        return n

    async def main() -> list[int]:
        return await asyncio.gather(*(call(n) for n in sizes))

    got = asyncio.run(main())
    assert all(g in (0, n) for g, n in zip(got, sizes, strict=True))
    u = b.usage()
    assert u.sub_calls == sum(got) <= limit
    assert u.input_tokens == 3 * sum(got) and u.output_tokens == 2 * sum(got)
