"""Kill the host process of a run mid-way (SIGKILL), resume it, and count at the server what was paid twice.

The run: a 500-item `llm_map` (one item a call) against the fake server in its own process, then a
submit. The test kills the host once the journal shows N answered sub-calls, then resumes in a new
process (a host reboot: only the journal survives). The server's request counts show that every
call the journal answered was not sent again, and that the resumed answer is the uninterrupted one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rlmnb._engine.journal import journal_paths, read_journal
from rlmnb.events import ModelReply
from rlmnb.testing.fake_process import FakeServerProcess

HOST = Path(__file__).with_name("resume_host.py")
MAP = "```python\nres = llm_map(inputs['items'], 'Upper-case the item', pack_items=1)\nprint(len(res))\n```"
SUBMIT = "```python\nsubmit('|'.join(res))\n```"
EXPECTED = "|".join(f"ITEM-{i:03d}" for i in range(500))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[FakeServerProcess]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"fake-root": [MAP, SUBMIT, "no code", SUBMIT]}))
    with FakeServerProcess(script=str(script), responder="packed_upper", latency=0.01) as fake:
        yield fake


def host(url: str, folder: Path, mode: str, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HOST.parent.parent), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, str(HOST), url, str(folder), mode, *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def answered(path: Path) -> tuple[int, int]:
    """(root replies, answered sub-calls) the journal at `path` holds."""
    trajectory = read_journal(path).trajectory
    return len(trajectory.of(ModelReply)), sum(1 for row in trajectory.sub_calls() if row["reply"])


def kill_when(proc: subprocess.Popen[str], folder: Path, sub_calls: int, timeout: float = 120.0) -> Path:
    """SIGKILL the host once its journal shows `sub_calls` finished sub-calls; returns the journal."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = journal_paths(folder)
        if found and found[0].read_bytes().count(b'"kind": "sub_call_finished"') >= sub_calls:
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=30)
            return found[0]
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        time.sleep(0.005)  # polling a file another process writes: there is nothing to wait on
    raise AssertionError("the run never reached the kill point")


def requests(server: FakeServerProcess) -> tuple[int, int]:
    models = server.stats()["models"]
    return models.get("fake-root", 0), models.get("fake-sub", 0)


@pytest.mark.parametrize("at", [1, 250])
def test_sigkill_mid_map_then_resume_in_a_fresh_process(server: FakeServerProcess, tmp_path: Path, at: int) -> None:
    folder = tmp_path / "runs"
    journal = kill_when(host(server.url, folder, "run"), folder, at)
    sent_root, sent_sub = requests(server)
    root_done, sub_done = answered(journal)
    assert sub_done >= at and sent_sub < 500  # killed mid-map
    resumed = finish(host(server.url, folder, "resume"))
    assert resumed["status"] == "submitted" and resumed["answer"] == EXPECTED
    total_root, total_sub = requests(server)
    # every call the journal answered was served from it; everything else was sent exactly once more
    assert total_sub - sent_sub == 500 - sub_done
    assert total_root - sent_root == 2 - root_done
    paid_twice = sent_sub - sub_done  # in flight (or answered but not yet journaled) at the kill
    assert paid_twice <= 8 + 8, paid_twice  # at most about the concurrency limit
    assert read_journal(Path(resumed["journal"])).header["resumed_from"] == str(journal)


def test_resume_after_max_iterations_ran_out(server: FakeServerProcess, tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    first = finish(host(server.url, folder, "run", "1"))
    assert first["status"] == "fallback"
    assert requests(server) == (2, 500)  # turn 1 and the fallback call
    resumed = finish(host(server.url, folder, "resume", "3"))
    assert resumed["status"] == "submitted" and resumed["answer"] == EXPECTED
    assert requests(server) == (3, 500)  # only the new turn 2 was sent
