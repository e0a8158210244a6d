"""SIGKILL the notebook kernel running a %%rlm with a 500-call llm_map, resume it in a new kernel (issue 23).

A real ipykernel (jupyter_client, as nbclient drives it) runs the cell against the fake server in its
own process; the test kills the kernel once the run's journal shows 200 answered sub-calls, starts a
fresh kernel and runs `%%rlm --resume` there. The server's counts show no answered call was sent again.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rlmnb._engine.journal import journal_paths, read_journal
from rlmnb.events import ModelReply
from rlmnb.testing.fake_process import FakeServerProcess

jupyter_client = pytest.importorskip("jupyter_client")

MAP = "```python\nres = llm_map(inputs['items'], 'Upper-case the item', pack_items=1)\nprint(len(res))\n```"
SUBMIT = "```python\nsubmit('|'.join(res))\n```"
EXPECTED = "|".join(f"ITEM-{i:03d}" for i in range(500))
SETUP = """
%load_ext rlmnb
%config RLMMagics.sandbox = 'local'
%config RLMMagics.cache = False
%config RLMMagics.max_concurrency = 8
%config RLMMagics.min_concurrency = 8
%config RLMMagics.max_llm_calls = 2000
%config RLMMagics.map_retries = 0
from rlmnb.testing.fake_server import lm_for
root, sub = lm_for({url!r}, 'fake-root'), lm_for({url!r}, 'fake-sub')
items = [f"item-{{i:03d}}" for i in range(500)]
"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[FakeServerProcess]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"fake-root": [MAP, SUBMIT]}))
    with FakeServerProcess(script=str(script), responder="packed_upper", latency=0.01) as fake:
        yield fake


def start(tmp_path: Path, folder: Path, url: str) -> tuple[Any, Any]:
    manager = jupyter_client.KernelManager(kernel_name="python3")
    manager.start_kernel(cwd=str(tmp_path), env={**os.environ, "RLMNB_JOURNAL_DIR": str(folder)})
    client = manager.client()
    client.start_channels()
    client.wait_for_ready(timeout=60)
    reply = run(client, SETUP.format(url=url), 120)
    assert reply["status"] == "ok", reply
    return manager, client


def run(client: Any, code: str, timeout: float) -> dict[str, Any]:
    msg_id = client.execute(code, store_history=False, allow_stdin=False)
    deadline = time.monotonic() + timeout
    while True:
        try:
            reply = client.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no reply within {timeout} s") from None
        if reply["parent_header"].get("msg_id") == msg_id:
            content: dict[str, Any] = reply["content"]
            return content


def stop(manager: Any, client: Any) -> None:
    client.stop_channels()
    if manager.is_alive():
        manager.shutdown_kernel(now=True)


def test_kernel_sigkill_mid_map_then_resume_in_a_new_kernel(server: FakeServerProcess, tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    manager, client = start(tmp_path, folder, server.url)
    try:
        client.execute("%%rlm -m root -s sub -i items --quiet\nUpper-case every item and join them with |",
                       store_history=False, allow_stdin=False)
        deadline = time.monotonic() + 180
        while True:
            found = journal_paths(folder)
            if found and found[0].read_bytes().count(b'"kind": "sub_call_finished"') >= 200:
                break
            assert time.monotonic() < deadline, "the run never reached 200 answers"
            time.sleep(0.005)  # polling a file the kernel writes: there is nothing to wait on
        manager.signal_kernel(signal.SIGKILL)
        deadline = time.monotonic() + 30
        while manager.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not manager.is_alive()
    finally:
        stop(manager, client)
    journal = journal_paths(folder)[0]
    sent_root, sent_sub = (server.stats()["models"].get(m, 0) for m in ("fake-root", "fake-sub"))
    recorded = read_journal(journal).trajectory
    root_done = len(recorded.of(ModelReply))
    sub_done = sum(1 for row in recorded.sub_calls() if row["reply"])
    assert 200 <= sub_done < 500
    manager, client = start(tmp_path, folder, server.url)
    try:
        reply = run(client, "%%rlm -m root -s sub -i items --quiet --resume\n(resumed)", 240)
        assert reply["status"] == "ok", reply
        check = run(client, f"assert _rlm.status == 'submitted', _rlm\nassert _rlm.answer == {EXPECTED!r}", 30)
        assert check["status"] == "ok", check
    finally:
        stop(manager, client)
    models = server.stats()["models"]
    assert models["fake-sub"] - sent_sub == 500 - sub_done  # nothing the journal answered was sent again
    assert models["fake-root"] - sent_root == 2 - root_done
