"""The broker's host work is bounded by construction: frames refused from their header, connections served a
bounded number at a time, request bytes held within a shared amount, JSON measured before it is decoded; both
transports (Unix socket and loopback TCP); and, through the product's path, a submitted value too large or too
deep, or a reply tampered with, is refused to the model while the run goes on and the host stays small.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import psutil
import pytest
from sandbox_support import code, leftovers, observations

from rlmnb import RLM
from rlmnb._ground.errors import SubmitSignal
from rlmnb._sandbox.bridge import (
    HEADER,
    MAX_FRAME,
    MAX_ITEMS,
    TOKEN_SIZE,
    Allowance,
    Broker,
    Limits,
    ProtocolError,
    TooLarge,
    bounded_loads,
    connect,
    json_items,
    pack,
    recv_frame,
    unix_listening_socket,
)
from rlmnb._sandbox.kernel.process import reply_payload
from rlmnb._sandbox.primitives import MAX_SUBMIT_BYTES, install
from rlmnb.events import CodeExecuted, GuardRejected
from rlmnb.testing import ScriptedLM


class GatedHost:
    """A SandboxHost whose llm_query waits for `gate`, counting the calls inside it at once."""

    def __init__(self, loop: asyncio.AbstractEventLoop, *, gated: bool = False) -> None:
        self.loop = loop
        self.tools: dict[str, Any] = {}
        self.gate = asyncio.Event()
        if not gated:
            self.gate.set()
        self.inside = 0
        self.most = 0
        self.entered = 0
        self.arrived = asyncio.Event()  # set each time a call enters
        self.prompts: list[str] = []

    async def llm_query(self, prompt: str, model: str | None = None, *, images: Any = None) -> str:
        self.prompts.append(prompt)
        self.inside += 1
        self.entered += 1
        self.most = max(self.most, self.inside)
        self.arrived.set()
        try:
            await self.gate.wait()
        finally:
            self.inside -= 1
        return prompt[:8].upper()

    async def llm_query_batched(self, prompts: Sequence[str], model: str | None = None, *,
                                images: Any = None) -> list[str]:
        return [await self.llm_query(p) for p in prompts]

    async def until_entered(self, n: int) -> None:
        async with asyncio.timeout(60):
            while self.entered < n:
                self.arrived.clear()
                await self.arrived.wait()


@pytest.fixture
def folder() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="rlmnb-broker-") as where:
        os.chmod(where, 0o700)
        yield where


@pytest.fixture(params=["unix", "tcp"])
async def served(request: pytest.FixtureRequest, folder: str) -> AsyncIterator[tuple[Broker, GatedHost]]:
    """A broker on either transport, serving a host without models."""
    listener = unix_listening_socket(os.path.join(folder, "broker.sock")) if request.param == "unix" else None
    broker = Broker(folder, listener)
    host = GatedHost(asyncio.get_running_loop())
    await broker.attach(host)  # type: ignore[arg-type]
    try:
        yield broker, host
    finally:
        await broker.close()
        broker.release()


async def _limited(folder: str, limits: Limits, *, gated: bool) -> tuple[Broker, GatedHost]:
    broker = Broker(folder, unix_listening_socket(os.path.join(folder, "broker.sock")), limits=limits)
    host = GatedHost(asyncio.get_running_loop(), gated=gated)
    await broker.attach(host)  # type: ignore[arg-type]
    return broker, host


def _request(broker: Broker, prompt: str = "hi", **extra: Any) -> dict[str, Any]:
    return {"run": broker.run, "turn": 1, "step": 1, "id": 1, "op": "llm_query", "prompt": prompt, **extra}


def _send(broker: Broker, raw: bytes, sent: threading.Event | None = None) -> Any:
    """Send raw bytes on a new connection and read the reply: the frame, or the error's type name."""
    with connect(broker.settings()) as sock:
        sock.settimeout(60)
        try:
            sock.sendall(raw)
        except OSError as exc:  # the broker closed while we were still sending
            return type(exc).__name__
        finally:
            if sent is not None:
                sent.set()
        try:
            return recv_frame(sock)
        except (OSError, ProtocolError) as exc:
            return type(exc).__name__


def _frame(data: bytes) -> bytes:
    return HEADER.pack(len(data)) + data


# ---- the two transports ----------------------------------------------------------------------------------------
async def test_the_kernel_sides_bridge_reaches_the_broker_on_either_transport(served: tuple[Broker, GatedHost]) -> None:
    from rlmnb._sandbox.kernel.side import SocketBridge

    broker, host = served
    settings = broker.settings()
    if broker.path:
        assert settings["path"] == broker.path and "port" not in settings
        assert stat.S_IMODE(os.stat(broker.path).st_mode) == 0o600
    else:
        assert settings["port"] == broker.port > 0 and "path" not in settings
    bridge = SocketBridge()
    bridge.settings = settings
    assert await asyncio.to_thread(bridge.llm_query, "hello") == "HELLO"
    wrong = b"0" * TOKEN_SIZE + pack(_request(broker))
    assert await asyncio.to_thread(_send, broker, wrong) == "ProtocolError"  # no answer without the secret
    assert host.prompts == ["hello"] and broker.refused == 1 and broker.calls == 1


def test_a_unix_socket_path_too_long_for_its_address_is_refused_in_one_sentence(folder: str) -> None:
    with pytest.raises(ValueError, match="shorter"):
        unix_listening_socket(os.path.join(folder, "x" * 120))


# ---- frames, connections and bytes held ---------------------------------------------------------------------------
async def test_a_frame_over_the_limit_is_refused_from_its_header_without_reading_its_body(
        served: tuple[Broker, GatedHost]) -> None:
    broker, host = served
    raw = broker.secret.encode() + HEADER.pack(MAX_FRAME + 1) + b"[" + b"1," * (4 << 20)
    assert await asyncio.to_thread(_send, broker, raw) in ("ProtocolError", "ConnectionResetError",
                                                          "BrokenPipeError")
    assert broker.bytes_read == TOKEN_SIZE + HEADER.size  # the token and the header, not one byte more
    assert broker.refused_frames == 1 and host.prompts == []
    assert (await asyncio.to_thread(_send, broker, broker.secret.encode() + pack(_request(broker))))["value"] == "HI"


async def test_the_kernel_side_refuses_a_batch_over_the_limit_before_sending_and_says_how_to_split(
        served: tuple[Broker, GatedHost]) -> None:
    from rlmnb._sandbox.kernel.side import SocketBridge

    broker, host = served
    bridge = SocketBridge()
    bridge.settings = broker.settings()
    prompts = ["y" * 1_000_000] * 70  # 70 MB
    with pytest.raises(ValueError, match="llm_query_batched") as refused:
        await asyncio.to_thread(bridge.llm_query_batched, prompts)
    fit = int(str(refused.value).split("at most ")[1].split(" ")[0].replace(",", ""))
    assert fit >= 1 and len(json.dumps(prompts[:fit])) <= MAX_FRAME  # the advice fits
    assert broker.bytes_read == 0 and host.prompts == []


async def test_connections_beyond_the_limit_wait_unread_until_one_ends(folder: str) -> None:
    broker, host = await _limited(folder, Limits(connections=3), gated=True)
    try:
        raw = broker.secret.encode() + pack(_request(broker))
        sent = [threading.Event() for _ in range(5)]
        calls = [asyncio.create_task(asyncio.to_thread(_send, broker, raw, s)) for s in sent]
        await host.until_entered(3)
        for s in sent:
            await asyncio.to_thread(s.wait, 60)
        assert host.inside == 3 and broker.bytes_read == 3 * len(raw)  # the other two: not accepted, not read
        host.gate.set()
        replies = await asyncio.gather(*calls)
        assert [r["value"] for r in replies] == ["HI"] * 5
        assert host.most == 3 and broker.bytes_read == 5 * len(raw)
    finally:
        await broker.close()
        broker.release()


async def test_request_bytes_held_at_once_stay_within_the_shared_amount(folder: str) -> None:
    big = "z" * 600_000
    broker, host = await _limited(folder, Limits(frame_bytes=700_000, bytes_held=1_000_000), gated=True)
    try:
        raw = broker.secret.encode() + pack(_request(broker, big))
        calls = [asyncio.create_task(asyncio.to_thread(_send, broker, raw)) for _ in range(3)]
        await host.until_entered(1)
        host.gate.set()
        replies = await asyncio.gather(*calls)
        assert [r["value"] for r in replies] == ["ZZZZZZZZ"] * 3
        assert host.most == 1  # one such request fits the shared amount at a time
    finally:
        await broker.close()
        broker.release()


async def test_an_allowance_lets_a_taker_through_only_when_enough_was_given_back() -> None:
    shared = Allowance(100)
    await shared.take(60)
    second = asyncio.create_task(shared.take(60))
    for _ in range(3):
        await asyncio.sleep(0)
    assert not second.done()
    shared.give(60)
    await second
    assert shared.free == 40
    with pytest.raises(TooLarge):
        await shared.take(101)


@pytest.mark.parametrize("body, what", [
    (b"[" + b"1," * MAX_ITEMS + b"1]", "items"),  # ~1 MB: within the bytes, over the values
    (b"[" * 100_000 + b"]" * 100_000, "depth"),
])
async def test_a_frame_of_too_many_values_or_too_deep_is_refused_before_it_is_decoded(
        served: tuple[Broker, GatedHost], body: bytes, what: str) -> None:
    broker, host = served
    with pytest.raises(TooLarge) as refused:
        json_items(body, max_bytes=MAX_FRAME, max_items=MAX_ITEMS)
    assert refused.value.what == what
    assert await asyncio.to_thread(_send, broker, broker.secret.encode() + _frame(body)) == "ProtocolError"
    assert broker.refused_frames == 1 and broker.calls == 0 and host.prompts == []


# ---- the bounded decoder ------------------------------------------------------------------------------------------
def test_bounded_loads_counts_structure_outside_strings_only() -> None:
    prose = json.dumps({"prompts": ['a, b: [c] {d} "e" \\ ' * 20_000] * 20})  # 1.2 M commas and brackets, in strings
    assert bounded_loads(prose, max_bytes=MAX_FRAME, max_items=100)["prompts"][0].startswith("a, b")
    assert bounded_loads("[[[1]]]", max_bytes=100, max_items=10, max_depth=3) == [[[1]]]
    with pytest.raises(TooLarge):
        bounded_loads("[[[[1]]]]", max_bytes=100, max_items=10, max_depth=3)
    with pytest.raises(TooLarge):
        bounded_loads("[1, 2, 3]", max_bytes=5, max_items=10)
    with pytest.raises(TooLarge):
        bounded_loads(json.dumps(["x"] * 100), max_bytes=10_000, max_items=50)  # refused on its strings alone
    for broken in ('"open', "[1, 2", b"\xff\xfe[]"):
        with pytest.raises(ProtocolError):
            bounded_loads(broken, max_bytes=100, max_items=10)


def _reply(payload: str) -> dict[str, Any]:
    return {"user_expressions": {"r": {"status": "ok", "data": {"application/x-rlmnb+json": payload}}}}


def test_a_reply_over_the_bounds_reads_as_an_error_outcome_not_a_decode() -> None:
    assert reply_payload(_reply('{"ok": 1}')) == {"ok": 1}
    for payload in ("[" * 10_000 + "]" * 10_000, "[" + "[]," * 600_000 + "[]]"):
        refused = reply_payload(_reply(payload))
        assert refused["error_type"] == "ReplyRefused" and "error" in refused
    for payload in ("not json", '"a string"', "[1, 2]"):
        assert reply_payload(_reply(payload))["error_type"] == "ReplyRefused"
    assert reply_payload(_reply("null")) is None  # no outcome kept: the host asks again
    assert reply_payload({"user_expressions": {}}) is None


def _submitted(value: Any) -> SubmitSignal:
    ns: dict[str, Any] = {}
    install(ns, None)  # type: ignore[arg-type]
    with pytest.raises(SubmitSignal) as signal:
        ns["submit"](value)
    return signal.value


def test_submit_refuses_a_value_too_large_or_too_deep_and_accepts_one_within() -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    for value in (deep, "x" * (MAX_SUBMIT_BYTES + 1), "é" * (MAX_SUBMIT_BYTES // 6 + 1), [1] * 1_000_000,
                  {str(i): i for i in range(300_000)}):
        signal = _submitted(value)
        assert signal.value is None and signal.error, type(value)
    assert _submitted(["a" * 1000] * 1000).value == ["a" * 1000] * 1000
    assert _submitted({"n": 12, "rows": [[1.5, None, True]] * 10}).error is None


# ---- through the product's path -----------------------------------------------------------------------------------
@pytest.mark.integration
@pytest.mark.usefixtures("stop_the_spare")
def test_a_huge_or_deep_submit_or_a_tampered_reply_is_refused_to_the_model_and_the_run_goes_on() -> None:
    rss = psutil.Process().memory_info().rss
    replies = [
        code("x = []\nfor _ in range(100_000):\n    x = [x]\nsubmit(x)"),
        code("submit('x' * 200_000_000)"),
        code("import sys\nside = sys.modules['rlmnb._sandbox.kernel.side']\nkept = side._fitted\n"
             "side._fitted = lambda result: '[' * 100_000 + ']' * 100_000"),
        code("side._fitted = kept\nprint(len(llm_query_batched(['y' * 1_000_000] * 70)))"),
        code("submit('ok')"),
    ]
    root = ScriptedLM(replies, name="root")
    result = RLM(root, ScriptedLM(["x"] * 5, name="sub"), sandbox="kernel", evidence_check=False).run("q", text="hi")
    assert result.status == "submitted" and result.answer == "ok"
    assert [e.guard for e in result.trajectory.of(GuardRejected)] == ["jsonable", "jsonable"]
    steps = result.trajectory.of(CodeExecuted)
    assert steps[2].error_type == "ReplyRefused" and not steps[2].restarted
    assert steps[3].error_type == "ValueError" and "llm_query_batched" in observations(root)[3]
    assert psutil.Process().memory_info().rss - rss < 200 * 2**20
    assert leftovers() == {}
