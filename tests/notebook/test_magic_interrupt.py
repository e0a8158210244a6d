"""Interrupting a running %%rlm cell in a real kernel (the stop button): clean end, nothing left behind."""

from __future__ import annotations

import json
import queue
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

jupyter_client = pytest.importorskip("jupyter_client")

SETUP = """\
import os
os.environ["RLMNB_WARM_KERNEL"] = "0"  # no spare kernel: every process and thread left would be the run's
import asyncio, json, threading, psutil
from pathlib import Path
from rlmnb.testing import ScriptedLM

FLAG = Path({flag!r})

class SlowLM:
    \"\"\"A sub-model that says when it is called, then takes a minute to answer.\"\"\"
    name = "slow"

    async def acomplete(self, messages, **params):
        FLAG.touch()
        await asyncio.sleep(60)
        raise AssertionError("never answered")

root = ScriptedLM(["```python\\nprint(inputs['text'][:5])\\n```",
                   "```python\\nanswers = llm_query_batched(['look'] * 8)\\n```"], name="root")
slow = SlowLM()
text = "alpha beta gamma " * 100
keep_me = {{"a": [1, 2, 3]}}
%load_ext rlmnb
def snapshot():
    # the process's one kernel launcher (rlmnb-sandbox-spawner) outlives runs by design
    return {{"threads": sorted(t.name for t in threading.enumerate() if t.name != "rlmnb-sandbox-spawner"),
             "children": [p.pid for p in psutil.Process().children(recursive=True)]}}
before = snapshot()
"""

CHECK = """\
import json
after = snapshot()
r = _rlm
print(json.dumps({"status": r.status, "kinds": [e.kind for e in r.trajectory.events],
                  "threads_before": before["threads"], "threads_after": after["threads"],
                  "children_before": before["children"], "children_after": after["children"],
                  "keep_me": keep_me, "out_defined": "out" in globals(),
                  "session": r.session is not None, "sandbox": r.trajectory.events[0].sandbox}))
"""


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    manager = jupyter_client.KernelManager(kernel_name="python3")
    manager.start_kernel(cwd=str(tmp_path))
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=60)
        yield manager, client
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def execute(client: Any, code: str, timeout: float = 60) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    msg_id = client.execute(code, store_history=True, allow_stdin=False)
    return wait_reply(client, msg_id, timeout)


def wait_reply(client: Any, msg_id: str, timeout: float) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The execute reply and every iopub message of that request, until the kernel is idle again."""
    deadline = time.monotonic() + timeout
    outputs: list[dict[str, Any]] = []
    while True:
        try:
            msg = client.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no idle status within {timeout} s; got {[m['msg_type'] for m in outputs]}") from None
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
        outputs.append(msg)
    while True:  # skip stale replies (wait_for_ready may have sent several kernel_info requests)
        reply = client.get_shell_msg(timeout=max(1, deadline - time.monotonic()))
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply["content"], outputs


@pytest.mark.parametrize("sandbox", ["local", "kernel"])
def test_interrupting_a_running_cell_ends_the_run_cleanly(kernel: tuple[Any, Any], tmp_path: Path,
                                                          sandbox: str) -> None:
    manager, client = kernel
    flag = tmp_path / "sub-call-started"
    reply, outputs = execute(client, SETUP.format(flag=str(flag)))
    assert reply["status"] == "ok", outputs

    msg_id = client.execute(f"%%rlm -m root -s slow -i text -o out --sandbox {sandbox}\nLook at everything.",
                            store_history=True, allow_stdin=False)
    deadline = time.monotonic() + 60
    while not flag.exists():  # the run is inside its second turn, waiting on the sub-model
        assert time.monotonic() < deadline, "the run never reached its sub-calls"
        time.sleep(0.05)
    time.sleep(0.8)  # long enough for the widget's pusher (4 per second) to draw the 8 sub-calls in flight
    interrupted_wall = datetime.now(UTC)
    interrupted_at = time.monotonic()
    manager.interrupt_kernel()
    reply, outputs = wait_reply(client, msg_id, timeout=60)
    took = time.monotonic() - interrupted_at

    assert took < 15, f"the interrupted cell took {took:.1f} s to finish"
    assert reply["status"] == "error" and reply["ename"] == "RunInterrupted"  # queued cells are skipped
    errors = [m["content"] for m in outputs if m["msg_type"] == "error"]
    assert len(errors) == 1 and errors[0]["traceback"] == [
        "Run interrupted after 2 turn(s); the partial trajectory is kept and the RunResult is in _rlm and out."]
    live = [m for m in outputs if m["msg_type"] == "comm_msg" and m["header"]["date"] < interrupted_wall
            and "(+8 in flight) / 50" in str(m["content"]["data"].get("state", {}).get("value", ""))]
    assert live, "the widget was not updated while the run was going on"
    updates = [m["content"]["data"] for m in outputs if m["msg_type"] == "update_display_data"]
    assert updates and "interrupted" in updates[-1]["text/html"]  # the widget's fallback shows the end state

    reply, outputs = execute(client, CHECK)
    assert reply["status"] == "ok", outputs
    state = json.loads(next(m["content"]["text"] for m in outputs if m["msg_type"] == "stream"))
    assert state["status"] == "interrupted" and not state["session"] and state["sandbox"] == sandbox
    kinds = state["kinds"]
    assert kinds.count("turn_started") == 2 and "sub_call_started" in kinds and kinds[-1] == "run_finished"
    assert state["threads_after"] == state["threads_before"], "threads were left behind"
    assert state["children_after"] == state["children_before"] == [], "processes were left behind"
    assert state["keep_me"] == {"a": [1, 2, 3]} and state["out_defined"]  # -o NAME holds an interrupted run too
