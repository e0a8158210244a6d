"""Peers run apart, and `--max-time` is one wall-clock bound for every method of an evaluation.

A peer's REPL runs the model's code in its own process, so every peer runs in a forked child, never in the
caller's process (a notebook's kernel). rlmnb's methods keep the bound themselves (`RLM(max_time=...)`); `direct`
waits that long for its one reply; a peer gets it as its own bound where it has one (rlms, minrlm: checked
between turns), and its child is killed, with whatever it started, a grace period after it. Peers run here against the fake server
(real HTTP) or as stand-in methods that hang the way a peer's turn of sub-calls does.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rlmnb._eval import EvalSpec, Setup, run_eval
from rlmnb._eval import methods as methods_module
from rlmnb._eval.command import add_arguments, spec_from_args
from rlmnb._eval.methods import DirectMethod, Outcome, run_apart
from rlmnb._eval.runner import run_one
from rlmnb._eval.tasks import Instance, get_task
from rlmnb._ground.errors import ConfigError
from rlmnb._ground.usage import Usage

FILLER = "Nothing to see in this line of filler text. " * 40


def _rows(tmp_path: Path, n: int = 1) -> Path:
    path = tmp_path / "cities.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": "Which city is named? Answer with the city.",
                                        "context": FILLER + "The city is Lyon." + FILLER, "answers": ["Lyon"]}) + "\n"
                            for i in range(n)), encoding="utf-8")
    return path


def _instance(tmp_path: Path) -> Instance:
    return get_task(f"jsonl:{_rows(tmp_path)}").generate(8000)


class Hanging:
    """A peer whose turn never ends: it starts a child process (as fast_rlm starts Deno) and waits."""

    name = "rlms"

    def __init__(self, pid_file: Path) -> None:
        self.pid_file = pid_file

    def run(self, instance: Instance, setup: Setup, *, max_cost: float | None = None) -> Outcome:
        helper = subprocess.Popen(["sleep", "600"])
        self.pid_file.write_text(str(helper.pid))
        time.sleep(600)
        return Outcome("never", "submitted", Usage())


class Quick:
    name = "minrlm"

    def run(self, instance: Instance, setup: Setup, *, max_cost: float | None = None) -> Outcome:
        return Outcome("Lyon", "submitted", Usage(input_tokens=7, output_tokens=2, wall_s=0.01), note="quick")


class Dying:
    name = "dspy_rlm"

    def run(self, instance: Instance, setup: Setup, *, max_cost: float | None = None) -> Outcome:
        os._exit(3)


class Tampering:
    """A peer whose model code changes the process it runs in."""

    name = "rlms"

    def run(self, instance: Instance, setup: Setup, *, max_cost: float | None = None) -> Outcome:
        os.environ["RLMNB_TAMPERED"] = "yes"
        return Outcome(str(os.getpid()), "submitted", Usage())


class Unready:
    name = "fast_rlm"

    def run(self, instance: Instance, setup: Setup, *, max_cost: float | None = None) -> Outcome:
        raise ConfigError("method fast_rlm needs Deno on PATH.")


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"  # killed, waiting for its new parent to reap it


def test_a_peer_past_max_time_is_stopped_with_what_it_started(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(methods_module, "GRACE_S", 0.5)
    pid_file = tmp_path / "helper.pid"
    started = time.perf_counter()
    outcome = run_apart(Hanging(pid_file), _instance(tmp_path), Setup("openai/x", settings={"max_time": 1.0}))
    assert time.perf_counter() - started < 30
    assert (outcome.answer, outcome.status, outcome.extra.get("killed")) == (None, "budget_exhausted", True)
    assert outcome.usage.wall_s >= 1.0
    helper = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while not _gone(helper) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(helper), "the process the peer started outlived it"


def test_ctrl_c_stops_a_peer_run_apart_and_what_it_started(tmp_path: Path) -> None:
    import signal
    import threading

    pid_file = tmp_path / "helper.pid"

    def press() -> None:
        deadline = time.monotonic() + 20
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)  # a real signal, as Ctrl-C sends: it wakes the blocked wait

    threading.Thread(target=press, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        run_apart(Hanging(pid_file), _instance(tmp_path), Setup("openai/x"))  # no bound: only Ctrl-C ends it
    helper = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while not _gone(helper) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(helper)


def test_a_peer_within_max_time_keeps_its_outcome_and_a_dying_one_gives_an_error_row(tmp_path: Path) -> None:
    setup = Setup("openai/x", settings={"max_time": 30.0})
    outcome = run_apart(Quick(), _instance(tmp_path), setup)
    assert (outcome.answer, outcome.status, outcome.usage.input_tokens, outcome.note) == ("Lyon", "submitted", 7,
                                                                                         "quick")
    died = run_apart(Dying(), _instance(tmp_path), setup)
    assert (died.answer, died.status) == (None, "error")


def test_a_peer_runs_apart_from_the_caller_and_its_config_errors_still_stop_the_evaluation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RLMNB_TAMPERED", raising=False)
    spec = EvalSpec(tasks=[f"jsonl:{_rows(tmp_path)}"], sizes=["8k"], methods=["rlm"], setup=Setup("openai/x"))
    row = run_one(Tampering(), _instance(tmp_path), spec)  # no max_time: apart all the same
    assert row.status == "submitted" and json.loads(row.prediction) != str(os.getpid())
    assert "RLMNB_TAMPERED" not in os.environ
    with pytest.raises(ConfigError):
        run_one(Unready(), _instance(tmp_path), spec)


def test_minrlm_keeps_the_bound_itself_through_the_evaluation(fake_server_factory: Callable[..., Any],
                                                              tmp_path: Path) -> None:
    if importlib.util.find_spec("minrlm") is None:  # not importorskip: importing it here would bypass the adapter
        pytest.skip("pip install minrlm")
    # a root that never says FINAL, 0.4 s a reply: 8 turns would take 3 s; the bound is 1 s
    server = fake_server_factory(responder=lambda messages: "Reading on.\n```python\nprint(len(input_0))\n```",
                                 latency=0.4)
    from rlmnb._models.litellm import LiteLLM

    root = LiteLLM("openai/fake-root", api_base=server.url, api_key="fake-key", temperature=0.0, max_tokens=100)
    spec = EvalSpec(tasks=[f"jsonl:{_rows(tmp_path)}"], sizes=["8k"], methods=["minrlm"],
                    setup=Setup(root, None, {"max_iterations": 8, "max_time": 1.0}), n=1)
    started = time.perf_counter()
    [row] = run_eval(spec).rows
    assert time.perf_counter() - started < 30
    assert row.status == "budget_exhausted", (row.status, row.error, row.root_calls, row.wall_s, row.prediction)
    assert 1 <= row.root_calls < 8 and "killed" not in row.extra  # its own bound, not the kill


def test_direct_waits_max_time_for_its_reply(fake_server_factory: Callable[..., Any], tmp_path: Path) -> None:
    from rlmnb._models.litellm import LiteLLM

    slow, quick = (fake_server_factory(responder=lambda messages: "Lyon", latency=latency) for latency in (20.0, 0.5))
    instance = _instance(tmp_path)
    settings = {"max_time": 5.0}
    started = time.perf_counter()
    outcome = DirectMethod().run(instance, Setup(LiteLLM("openai/fake-root", api_base=slow.url, api_key="fake-key",
                                                         context_window=16_000), settings=settings))
    assert time.perf_counter() - started < 15
    assert (outcome.answer, outcome.status) == (None, "budget_exhausted")
    outcome = DirectMethod().run(instance, Setup(LiteLLM("openai/fake-root", api_base=quick.url, api_key="fake-key",
                                                         context_window=16_000), settings=settings))
    assert (outcome.answer, outcome.status) == ("Lyon", "submitted")


def test_max_time_reaches_every_method_and_a_bad_one_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    base = ["--task", "niah", "--sizes", "8k", "-m", "openai/local"]
    assert spec_from_args(parser.parse_args([*base, "--max-time", "600"])).setup.settings["max_time"] == 600
    assert "max_time" not in spec_from_args(parser.parse_args(base)).setup.settings
    for bad in ("0", "-1", "later", "inf"):
        with pytest.raises(SystemExit):
            parser.parse_args([*base, "--max-time", bad])
        assert "is not a number of seconds" in capsys.readouterr().err
