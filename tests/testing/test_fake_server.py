"""The fake OpenAI-compatible server over real HTTP: replies, script, knobs, stats, process mode."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from rlmnb.testing.fake_server import FakeServer, Latency, load_responder, needle_responder

pytestmark = pytest.mark.integration


def post(server: Any, body: dict[str, Any], *, key: str = "k", timeout: float = 10) -> tuple[int, dict[str, str], Any]:
    req = urllib.request.Request(f"{server.url}/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read())


def chat(model: str, *contents: str) -> dict[str, Any]:
    roles = ["user", "assistant"]
    return {"model": model, "messages": [{"role": roles[i % 2], "content": c} for i, c in enumerate(contents)]}


def test_needle_responder_and_plausible_usage(fake_server: FakeServer) -> None:
    status, _, body = post(fake_server, chat("fake-sub", "blah the magic number is 4821937. more"))
    assert status == 200
    assert body["object"] == "chat.completion" and body["model"] == "fake-sub"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "4821937"}
    usage = body["usage"]
    assert usage["prompt_tokens"] > 5 and usage["completion_tokens"] == 2
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert post(fake_server, chat("fake-sub", "no number here"))[2]["choices"][0]["message"]["content"] == "NONE"
    assert needle_responder([{"role": "user", "content": "magic number is 12345678"}]) == "NONE"  # 8 digits


def test_models_stats_and_reset(fake_server: FakeServer) -> None:
    with urllib.request.urlopen(f"{fake_server.url}/models", timeout=5) as resp:
        names = [m["id"] for m in json.loads(resp.read())["data"]]
    assert "fake-sub" in names
    post(fake_server, chat("fake-sub", "x"))
    post(fake_server, chat("other", "y"))
    with urllib.request.urlopen(f"{fake_server.base_url}/stats", timeout=5) as resp:
        stats = json.loads(resp.read())
    assert stats["requests"] == 2 and stats["replies"] == 2 and stats["models"] == {"fake-sub": 1, "other": 1}
    assert stats["in_flight"] == 0 and stats["peak_in_flight"] == 1
    req = urllib.request.Request(f"{fake_server.base_url}/reset", data=b"", method="POST")
    urllib.request.urlopen(req, timeout=5).close()
    assert fake_server.stats()["requests"] == 0


def test_script_is_served_by_assistant_turns(fake_server_factory: Any, tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"root": ["first", "second"]}))
    server = fake_server_factory(script=path)
    assert post(server, chat("root", "q"))[2]["choices"][0]["message"]["content"] == "first"
    assert post(server, chat("root", "q", "first", "obs"))[2]["choices"][0]["message"]["content"] == "second"
    assert post(server, chat("root", "another q"))[2]["choices"][0]["message"]["content"] == "first"
    status, _, body = post(server, chat("root", "q", "a", "b", "c", "d"))
    assert status == 400 and "has 2 replies" in body["error"]["message"]
    assert post(server, chat("not-scripted", "magic number is 1234567"))[2]["choices"][0]["message"]["content"] \
        == "1234567"


def test_responders_builtin_import_path_and_callable() -> None:
    assert load_responder("echo")([{"role": "user", "content": "hi"}]) == "hi"
    assert load_responder("rlmnb.testing.fake_server:needle_responder") is needle_responder
    assert load_responder("find_needle")([{"role": "user", "content": "magic number is 7654321"}]) == "7654321"
    with pytest.raises(ValueError, match="import path"):
        load_responder("no-such-thing")


def test_faults_429_with_retry_after_and_500(fake_server_factory: Any) -> None:
    server = fake_server_factory(faults={"429": 1.0}, retry_after=2.5)
    status, headers, body = post(server, chat("m", "x"))
    assert status == 429 and headers["Retry-After"] == "2.5" and headers["retry-after-ms"] == "2500"
    assert body["error"]["code"] == "rate_limit_exceeded"
    server500 = fake_server_factory(faults={"500": 1.0})
    assert post(server500, chat("m", "x"))[0] == 500
    assert server500.stats()["faults"] == {"500": 1}


def test_fault_models_limit_where_faults_apply(fake_server_factory: Any) -> None:
    server = fake_server_factory(faults={"500": 1.0}, fault_models={"flaky"})
    assert post(server, chat("flaky", "x"))[0] == 500
    assert post(server, chat("steady", "x"))[0] == 200


def test_malformed_drop_and_timeout_faults(fake_server_factory: Any) -> None:
    malformed = fake_server_factory(faults={"malformed": 1.0})
    req = urllib.request.Request(f"{malformed.url}/chat/completions", data=json.dumps(chat("m", "x")).encode())
    with urllib.request.urlopen(req, timeout=5) as resp:
        with pytest.raises(json.JSONDecodeError):
            json.loads(resp.read())
    dropped = fake_server_factory(faults={"drop": 1.0})
    with pytest.raises((ConnectionError, urllib.error.URLError, OSError)):
        post(dropped, chat("m", "x"))
    assert dropped.stats()["statuses"] == {"dropped": 1}
    hanging = fake_server_factory(faults={"timeout": 1.0}, hang_s=30)
    started = time.perf_counter()
    with pytest.raises((TimeoutError, urllib.error.URLError, OSError)):
        post(hanging, chat("m", "x"), timeout=0.3)
    assert time.perf_counter() - started < 5


def test_fault_draws_are_seeded_by_request_not_arrival_order(fake_server_factory: Any) -> None:
    def outcomes(server: FakeServer) -> list[int]:
        return [post(server, chat("m", f"prompt {i}"))[0] for i in range(40)]

    a = outcomes(fake_server_factory(faults={"500": 0.5}, seed=3))
    b = outcomes(fake_server_factory(faults={"500": 0.5}, seed=3))
    c = outcomes(fake_server_factory(faults={"500": 0.5}, seed=4))
    assert a == b and a != c and 5 < a.count(500) < 35
    server = fake_server_factory(faults={"500": 0.5}, seed=3)
    retried = [post(server, chat("m", "same")) [0] for _ in range(20)]
    assert 200 in retried and 500 in retried  # a repeated request gets fresh draws


def test_api_key_and_context_window_errors(fake_server_factory: Any) -> None:
    server = fake_server_factory(api_key="right", context_window=50)
    status, _, body = post(server, chat("m", "x"), key="wrong")
    assert status == 401 and body["error"]["code"] == "invalid_api_key"
    status, _, body = post(server, chat("m", "word " * 400), key="right")
    assert status == 400 and body["error"]["code"] == "context_length_exceeded"
    assert "maximum context length is 50 tokens" in body["error"]["message"]
    assert post(server, chat("m", "short"), key="right")[0] == 200


def test_latency_and_peak_in_flight(fake_server_factory: Any) -> None:
    import aiohttp

    server = fake_server_factory(latency=0.2)

    async def burst() -> float:
        async with aiohttp.ClientSession() as session:
            async def one(i: int) -> int:
                async with session.post(f"{server.url}/chat/completions", json=chat("m", f"p{i}")) as resp:
                    await resp.read()
                    return resp.status

            started = time.perf_counter()
            statuses = await asyncio.gather(*(one(i) for i in range(20)))
            assert statuses == [200] * 20
            return time.perf_counter() - started

    elapsed = asyncio.run(burst())
    assert elapsed >= 0.2
    assert server.stats()["peak_in_flight"] == 20  # concurrent, not serial


def test_latency_specs() -> None:
    import random

    rng = random.Random(0)
    assert Latency(0.1).draw(rng) == 0.1
    assert 0.05 <= Latency("uniform:0.05,0.15").draw(rng) <= 0.15
    assert Latency("exp:0.1").draw(rng) >= 0
    assert Latency("normal:0.1,0.5").draw(rng) >= 0
    with pytest.raises(ValueError):
        Latency("uniform:1")
    with pytest.raises(ValueError):
        FakeServer(faults={"418": 0.1})


def test_usage_can_be_left_out(fake_server_factory: Any) -> None:
    server = fake_server_factory(report_usage=False)
    assert "usage" not in post(server, chat("m", "x"))[2]


def test_stop_is_idempotent_and_frees_the_port() -> None:
    server = FakeServer().start()
    port = server.port
    server.stop()
    server.stop()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2)


def test_subprocess_server_prints_its_port_and_stops(fake_server_process_factory: Any) -> None:
    server = fake_server_process_factory(faults={"500": 1.0}, fault_models=["flaky"], latency="uniform:0,0.01")
    assert server.port > 0
    assert post(server, chat("fake-sub", "magic number is 1112223"))[2]["choices"][0]["message"]["content"] \
        == "1112223"
    assert post(server, chat("flaky", "x"))[0] == 500
    assert server.stats()["requests"] == 2
    server.reset()
    assert server.stats()["requests"] == 0
    proc = server.proc
    server.stop()
    assert proc is not None and proc.poll() is not None


def test_session_server_is_shared_and_resettable(fake_server_session: FakeServer) -> None:
    fake_server_session.reset()
    assert post(fake_server_session, chat("fake-sub", "x"))[0] == 200
    assert fake_server_session.stats()["requests"] == 1


def test_packed_labels_answers_llm_classify_packs_of_texts_and_of_table_rows() -> None:
    from rlmnb._operators.packing import parse_reply, render_pack
    from rlmnb.testing.generators import label_of, labelled_table

    frame, truth = labelled_table(6, seed=3)
    rows = [json.dumps({"user": u, "text": t}) for u, t in zip(frame["user"], frame["text"], strict=True)]
    items = rows[:3] + [str(t) for t in frame["text"][3:]]  # table rows as JSON records, and bare texts
    prompt = render_pack("Triage.", "one of the labels", items)
    answers, problems = parse_reply(load_responder("packed_labels")([{"role": "user", "content": prompt}]), 6)
    assert problems == {}
    assert [answers[i] for i in range(1, 7)] == list(truth) == [label_of(str(t)) for t in frame["text"]]
