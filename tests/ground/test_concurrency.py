"""AdaptiveLimiter: the cap holds, 429s halve it once per burst, successes climb back, retries give slots back."""

from __future__ import annotations

import asyncio

import pytest

from rlmnb._ground.concurrency import AdaptiveLimiter, backoff, current_limiter, note_rate_limited


async def test_never_more_than_the_limit_in_flight() -> None:
    limiter = AdaptiveLimiter(8, 2)
    inside = 0
    seen = 0

    async def work() -> None:
        nonlocal inside, seen
        async with limiter:
            inside += 1
            seen = max(seen, inside)
            await asyncio.sleep(0.001)
            inside -= 1

    await asyncio.gather(*(work() for _ in range(100)))
    assert seen == 8 == limiter.peak_in_flight
    assert limiter.in_flight == 0


async def test_a_burst_of_429s_halves_once_and_the_floor_holds() -> None:
    changes: list[tuple[int, str]] = []
    limiter = AdaptiveLimiter(16, 3, on_change=lambda n, why: changes.append((n, why)))
    gate = asyncio.Event()

    async def rate_limited() -> None:
        async with limiter:
            await gate.wait()
            assert note_rate_limited()

    tasks = [asyncio.create_task(rate_limited()) for _ in range(16)]
    await asyncio.sleep(0.01)
    gate.set()
    await asyncio.gather(*tasks)
    assert limiter.limit == 8 and limiter.rate_limits == 16
    assert changes == [(8, "rate limited (429): halved")]
    for _ in range(5):  # each new generation halves again, down to the floor
        async with limiter:
            note_rate_limited()
    assert limiter.limit == 3


async def test_successes_raise_the_limit_one_step_at_a_time() -> None:
    changes: list[int] = []
    limiter = AdaptiveLimiter(6, 1, increase_every=3, on_change=lambda n, why: changes.append(n))
    async with limiter:
        note_rate_limited()  # 6 -> 3
    for _ in range(12):
        async with limiter:
            pass
    assert changes == [3, 4, 5, 6]
    assert limiter.limit == 6 and limiter.increases == 3


async def test_default_increase_is_about_one_per_round_trip() -> None:
    limiter = AdaptiveLimiter(8, 1)
    async with limiter:
        note_rate_limited()  # 8 -> 4
    for _ in range(3):
        async with limiter:
            pass
    assert limiter.limit == 4
    async with limiter:
        pass
    assert limiter.limit == 5


async def test_failed_calls_do_not_count_as_successes() -> None:
    limiter = AdaptiveLimiter(4, 1, increase_every=1)
    async with limiter:
        note_rate_limited()
    with pytest.raises(RuntimeError):
        async with limiter:
            raise RuntimeError("boom")
    assert limiter.limit == 2 and limiter.in_flight == 0


async def test_backoff_gives_the_slot_back_while_sleeping() -> None:
    limiter = AdaptiveLimiter(1, 1)
    order: list[str] = []

    async def retrying() -> None:
        async with limiter:
            order.append("first try")
            await backoff(0.05)
            order.append("retry")

    async def other() -> None:
        await asyncio.sleep(0.01)
        async with limiter:
            order.append("other")

    await asyncio.gather(retrying(), other())
    assert order == ["first try", "other", "retry"]
    assert limiter.in_flight == 0 and limiter.peak_in_flight == 1


async def test_a_retry_after_a_halving_starts_a_new_generation() -> None:
    limiter = AdaptiveLimiter(8, 1)
    async with limiter:
        note_rate_limited()  # 8 -> 4
        await backoff(0)
        note_rate_limited()  # re-admitted under the new limit: this 429 is news, 4 -> 2
    assert limiter.limit == 2


async def test_cancelled_waiters_do_not_leak_capacity() -> None:
    limiter = AdaptiveLimiter(1, 1)
    release = asyncio.Event()

    async def holder() -> None:
        async with limiter:
            await release.wait()

    async def waiter() -> None:
        async with limiter:
            pass

    hold = asyncio.create_task(holder())
    await asyncio.sleep(0)
    waiting = [asyncio.create_task(waiter()) for _ in range(3)]
    await asyncio.sleep(0)
    waiting[0].cancel()
    release.set()
    await asyncio.gather(hold, *waiting, return_exceptions=True)
    assert limiter.in_flight == 0
    async with limiter:
        assert limiter.in_flight == 1


async def test_outside_a_limiter_the_helpers_are_harmless() -> None:
    assert current_limiter() is None
    assert note_rate_limited() is False
    await backoff(0)
    limiter = AdaptiveLimiter(2, 1)
    async with limiter:
        assert current_limiter() is limiter
    assert current_limiter() is None


async def test_waiters_are_admitted_in_arrival_order() -> None:
    limiter = AdaptiveLimiter(1, 1)
    order: list[int] = []

    async def work(i: int) -> None:
        async with limiter:
            order.append(i)
            await asyncio.sleep(0)

    await asyncio.gather(*(work(i) for i in range(10)))
    assert order == list(range(10))


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError):
        AdaptiveLimiter(2, 3)
    with pytest.raises(ValueError):
        AdaptiveLimiter(0, 0)
