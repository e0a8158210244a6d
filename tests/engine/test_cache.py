"""The response cache: keys, storage, bounds, and how sub-calls use it (hits are cached and free)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from rlmnb import RLM
from rlmnb._engine.cache import ResponseCache, cache_identity, default_cache_dir, open_cache, request_key
from rlmnb._ground.usage import CallUsage
from rlmnb._models.base import Completion
from rlmnb._models.litellm import LiteLLM
from rlmnb.events import SubCallFinished
from rlmnb.testing import ScriptedLM

MSGS = [{"role": "user", "content": "hello"}]


def code(body: str) -> str:
    return f"```python\n{body}\n```"


class CacheableScripted(ScriptedLM):
    """A scripted sub-model that opts in to caching, as LiteLLM does."""

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name}


def test_tests_never_touch_the_user_cache(rlmnb_cache_dir: Path) -> None:
    assert default_cache_dir() == rlmnb_cache_dir
    assert os.environ["RLMNB_CACHE_DIR"] == str(rlmnb_cache_dir)


def test_key_depends_on_model_messages_and_params_only() -> None:
    base = request_key({"model": "a"}, MSGS)
    assert base == request_key({"model": "a"}, [dict(m) for m in MSGS])
    assert len(base) == 64
    assert base != request_key({"model": "b"}, MSGS)
    assert base != request_key({"model": "a"}, [{"role": "user", "content": "hello!"}])
    assert base != request_key({"model": "a"}, MSGS, {"temperature": 0.5})
    assert request_key({"model": "a", "x": 1, "y": 2}, MSGS) == request_key({"y": 2, "x": 1, "model": "a"}, MSGS)


def test_litellm_identity_leaves_out_keys_and_transport_settings() -> None:
    one = LiteLLM("openai/m", api_key="sk-one", api_base="http://h/v1", temperature=0, timeout=5,
                  extra_headers={"Authorization": "Bearer sk-one"})
    two = LiteLLM("openai/m", api_key="sk-two", api_base="http://h/v1", temperature=0, timeout=60)
    assert cache_identity(one) == cache_identity(two) == {
        "model": "openai/m", "params": {"api_base": "http://h/v1", "temperature": 0}}
    assert "sk-" not in repr(cache_identity(one))
    assert cache_identity(LiteLLM("openai/m", temperature=1)) != cache_identity(two)
    assert cache_identity(ScriptedLM(["x"])) is None


def test_round_trip_is_free_and_marked_cached(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c")
    key = request_key({"model": "a"}, MSGS)
    assert cache.get(key) is None
    cache.put(key, Completion("hi there", CallUsage(120, 7, 0.01), model="a"))
    hit = cache.get(key)  # served from memory even before the write lands
    assert hit is not None and hit.text == "hi there" and hit.model == "a"
    assert hit.usage == CallUsage(0, 0, 0.0, cached=True)
    assert hit.meta["cached_input_tokens"] == 120 and hit.meta["cached_output_tokens"] == 7
    cache.close()
    again = ResponseCache(tmp_path / "c")  # a new process would see the same
    assert again.get(key) is not None and len(again) == 1
    again.clear()
    assert again.get(key) is None
    again.close()


def test_size_is_bounded(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "small", size_limit=200_000)
    big = "x" * 20_000
    for i in range(60):
        cache.put(request_key({"model": "a"}, [{"role": "user", "content": str(i)}]), Completion(big))
    assert cache.flush()
    assert cache.volume() < 600_000 and len(cache) < 60
    cache.close()


def test_open_cache_is_shared_per_folder(tmp_path: Path) -> None:
    assert open_cache(tmp_path / "a") is open_cache(tmp_path / "a")
    assert open_cache(tmp_path / "a") is not open_cache(tmp_path / "b")
    assert open_cache().directory == default_cache_dir()


def _needle_run(sub: Any, **settings: Any) -> Any:
    root = ScriptedLM([code("r = llm_query_batched(['p1', 'p2', 'p1'])\nprint(r)"), code("submit(r)")])
    return RLM(root, sub, sandbox="local", **settings).run("q", text="abc")


def test_sub_calls_are_cached_across_runs_and_cost_nothing() -> None:
    sub = CacheableScripted(lambda m: f"answer to {m[-1]['content']}", name="sub")
    first = _needle_run(sub)
    assert first.answer == ["answer to p1", "answer to p2", "answer to p1"]
    assert len(sub.requests) == 2  # the twin p1 in flight at the same time was sent once
    finished = first.trajectory.of(SubCallFinished)
    assert sorted(e.cached for e in finished) == [False, False, True]
    second = _needle_run(sub)
    assert second.answer == first.answer and len(sub.requests) == 2
    finished = second.trajectory.of(SubCallFinished)
    assert all(e.cached for e in finished) and all(e.usage["cost_usd"] == 0.0 for e in finished)
    assert second.usage.cached_calls == 3 and second.usage.sub_calls == 3
    assert second.usage.input_tokens == first.usage.input_tokens - sum(
        e.usage["input_tokens"] for e in first.trajectory.of(SubCallFinished))


def test_cache_false_turns_it_off() -> None:
    sub = CacheableScripted(lambda m: "same", name="sub")
    _needle_run(sub, cache=False)
    _needle_run(sub, cache=False)
    assert len(sub.requests) == 6


def test_scripted_models_are_never_cached() -> None:
    sub = ScriptedLM(lambda m: "same", name="sub")
    _needle_run(sub)
    _needle_run(sub)
    assert len(sub.requests) == 6


def test_failures_are_not_cached() -> None:
    calls = {"n": 0}

    def flaky(messages: Any) -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("transient")
        return "ok"

    sub = CacheableScripted(flaky, name="sub")
    root = ScriptedLM([code("print(llm_query_batched(['p']))"), code("print(llm_query_batched(['p']))"),
                       code("submit(1)")])
    result = RLM(root, sub, sandbox="local").run("q", text="abc")
    outputs = [m["content"] for m in root.requests[-1] if m["role"] == "user"]
    assert any("[error] RuntimeError: transient" in o for o in outputs)
    assert any("['ok']" in o for o in outputs)
    assert result.status == "submitted" and calls["n"] == 2


@pytest.mark.parametrize("bad", [None, 3, "str"])
def test_identity_must_be_a_dict(bad: Any) -> None:
    class Odd:
        name = "odd"

        def cache_identity(self) -> Any:
            return bad

    assert cache_identity(Odd()) is None


def test_a_batch_is_looked_up_once_off_the_event_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """llm_query_batched reads the cache for all its prompts in one get_many, never per call on the loop."""
    import threading

    from rlmnb._engine.cache import ResponseCache

    reader_threads: set[str] = set()
    calls: list[int] = []
    original_get, original_many = ResponseCache.get, ResponseCache.get_many

    def get(self: ResponseCache, key: str) -> object:
        reader_threads.add(threading.current_thread().name)
        return original_get(self, key)

    def get_many(self: ResponseCache, keys: list[str]) -> object:
        calls.append(len(keys))
        return original_many(self, keys)

    monkeypatch.setattr(ResponseCache, "get", get)
    monkeypatch.setattr(ResponseCache, "get_many", get_many)

    sub = CacheableScripted(lambda m: m[-1]["content"][::-1], name="cacheable")
    root = ScriptedLM(["```python\nr = llm_query_batched(['ab', 'cd', 'ef'])\nprint(r)\n```",
                       "```python\nsubmit(r)\n```"])
    result = RLM(root, sub, sandbox="local").run("q", text="t")
    assert result.answer == ["ba", "dc", "fe"]
    assert calls == [3]
    assert reader_threads and "rlmnb-run" not in reader_threads  # never read on the run's event loop
