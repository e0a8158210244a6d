"""`rlmnb eval` end to end: real HTTP through litellm to the fake OpenAI-compatible server.

The server answers every model with the oracle (root, sub-model and direct reader told apart by the
request), so scores are known; resume is proven by interrupting the evaluation from the server side
(`_thread.interrupt_main` after a given number of requests) and running it again; `--max-cost` by a
registered price and a limit that leaves room for only some runs.
"""

from __future__ import annotations

import _thread
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rlmnb._cli import EXIT_INTERRUPTED, main
from rlmnb._eval import read_rows
from rlmnb._eval.oracles import OracleModel


class Interrupting:
    """The oracle, which presses Ctrl-C in the main thread when the `stop_at`-th request arrives.

    That request is then held for a moment (like server latency), so the run is still in flight when
    the main thread sees the interrupt (a run that finishes first keeps its answer, as in a notebook).
    """

    def __init__(self, stop_at: int | None = None) -> None:
        self.oracle = OracleModel()
        self.stop_at = stop_at
        self.count = 0
        self.lock = threading.Lock()

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        with self.lock:
            self.count += 1
            stop = self.stop_at is not None and self.count == self.stop_at
        if stop:
            _thread.interrupt_main()
            time.sleep(1.0)
        return self.oracle(messages)


def _args(url: str, out: Path, *extra: str) -> list[str]:
    return ["eval", "--task", "niah,oolong", "--sizes", "8k", "--methods", "rlm,direct", "-m", "openai/eval-cli-root",
            "-s", "openai/eval-cli-sub", "--api-base", url, "--api-key", "fake-key", "-n", "2", "--out", str(out),
            "--sandbox", "local", "--context-window", "32000", "--quiet", *extra]


def test_eval_through_the_fake_server(fake_server_factory: Callable[..., Any], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    server = fake_server_factory(responder=OracleModel())
    code = main(_args(server.url, tmp_path, "--price", "openai/eval-cli-root=1,2", "--price", "openai/eval-cli-sub=0.5,1"))
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = list(read_rows(tmp_path / "results.jsonl"))
    assert len(rows) == 8 and {r.method for r in rows} == {"rlm", "direct"}
    assert all(r.score == 1.0 for r in rows), [(r.task, r.method, r.error) for r in rows if r.score < 1]
    rlm_rows = [r for r in rows if r.method == "rlm"]
    assert all(r.root_calls == 3 and r.sub_calls >= 1 and r.input_tokens > 0 for r in rlm_rows)
    from rlmnb.events import Trajectory  # each rlm run's trajectory is kept for reading; direct has none

    saved = sorted(p.name for p in (tmp_path / "trajectories").iterdir())
    assert saved == sorted(f"{r.task}-8k-rlm-{r.index}.json" for r in rlm_rows)
    assert all(Trajectory.load(r.extra["trajectory"]).events for r in rlm_rows)
    assert all("trajectory" not in r.extra for r in rows if r.method == "direct")
    assert all(r.cost_usd and r.cost_usd > 0 and r.unpriced_calls == 0 for r in rows)
    stats = server.stats()
    assert stats["replies"] == sum(r.calls for r in rows)  # every call went over HTTP, none from a cache
    assert "| task" in out and "100.0%" in out
    assert "cached in" not in out and all(r.cached_input_tokens == 0 for r in rows)  # no prompt cache: as before
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert len(summary) == 4 and (tmp_path / "summary.md").is_file()
    if (tmp_path / "plot.png").exists():
        assert (tmp_path / "plot.png").read_bytes()[:4] == b"\x89PNG"


def test_eval_table_shows_prompt_cached_tokens_and_what_they_saved(
        fake_server_factory: Callable[..., Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rlmnb._models.litellm import load_litellm

    rates = {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6, "cache_read_input_token_cost": 1e-7,
             "litellm_provider": "openai", "mode": "chat"}
    load_litellm().register_model({"openai/eval-cache-root": rates, "openai/eval-cache-sub": rates})
    server = fake_server_factory(responder=OracleModel(), prompt_cache=True)
    args = _args(server.url, tmp_path, "--methods", "rlm", "-n", "1")
    args[args.index("openai/eval-cli-root")] = "openai/eval-cache-root"
    args[args.index("openai/eval-cli-sub")] = "openai/eval-cache-sub"
    assert main(args) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    rows = list(read_rows(tmp_path / "results.jsonl"))
    cached = server.stats()["cached_tokens"]
    assert cached > 0 and sum(r.cached_input_tokens for r in rows) == cached  # every cached token, per answer
    assert sum(r.saved_usd for r in rows) == pytest.approx(cached * 9e-7)  # at the cached rate: 0.9 µ$ a token less
    head, _rule, *lines = [line for line in out.splitlines() if line.startswith("|")]
    cells = [c.strip() for c in head.strip("|").split("|")]
    assert cells[cells.index("sub tokens") + 1: cells.index("sub tokens") + 3] == ["cached in", "saved/query"]
    for row in (r for r in rows if r.task == "niah"):
        line = next(line for line in lines if line.startswith("| niah"))
        values = [c.strip() for c in line.strip("|").split("|")]
        assert values[cells.index("cached in")] == f"{row.cached_input_tokens:,}"
        assert values[cells.index("saved/query")] == f"${row.saved_usd:.4f}"


def test_eval_resumes_after_an_interruption(fake_server_factory: Callable[..., Any], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    responder = Interrupting(stop_at=12)  # rlm niah #0 (3 root + sub), direct niah #0 ... then stop mid-run
    server = fake_server_factory(responder=responder)
    assert main(_args(server.url, tmp_path)) == EXIT_INTERRUPTED
    first = list(read_rows(tmp_path / "results.jsonl"))
    assert 1 <= len(first) < 8
    deadline = time.monotonic() + 10
    while server.stats()["in_flight"] and time.monotonic() < deadline:  # the held request ends on its own
        time.sleep(0.05)
    requests_before = server.stats()["replies"]
    responder.stop_at = None
    assert main(_args(server.url, tmp_path)) == 0
    rows = list(read_rows(tmp_path / "results.jsonl"))
    assert len(rows) == 8 and len({r.key for r in rows}) == 8
    assert [r.finished_at for r in rows[: len(first)]] == [r.finished_at for r in first]
    redone = server.stats()["replies"] - requests_before
    # only the unfinished runs were made again (a sub-call the interrupted run finished comes from the cache)
    assert redone == sum(r.calls - r.cached_calls for r in rows[len(first):])
    assert "already in" in capsys.readouterr().err


def test_eval_stops_before_passing_max_cost(fake_server_factory: Callable[..., Any], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    server = fake_server_factory(responder=OracleModel())
    priced = ("--price", "openai/eval-cli-root=100,100", "--price", "openai/eval-cli-sub=100,100")
    assert main(_args(server.url, tmp_path / "dry", *priced, "--dry-run")) == 0
    dry = capsys.readouterr().out
    assert "Dry run: no model was called" in dry and "Estimated total" in dry
    assert server.stats()["requests"] == 0
    assert main(_args(server.url, tmp_path, *priced, "--max-cost", "4")) == 1
    err = capsys.readouterr().err
    assert "--max-cost" in err
    rows = list(read_rows(tmp_path / "results.jsonl"))
    assert 0 < len(rows) < 8
    assert sum(r.cost_usd or 0 for r in rows) <= 4.0


def test_eval_bad_arguments_are_one_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "--task", "browsecomp", "-m", "openai/x", "--out", str(tmp_path)]) == 2
    assert "unknown task 'browsecomp'" in capsys.readouterr().err
    assert main(["eval", "--sizes", "12 apples", "-m", "openai/x", "--out", str(tmp_path)]) == 2
    assert "write it like" in capsys.readouterr().err
    assert main(["eval", "--methods", "rlm,magic", "-m", "openai/x", "--out", str(tmp_path)]) == 2
    assert "unknown method 'magic'" in capsys.readouterr().err
    assert main(["eval", "-m", "openai/unpriced-model", "--max-cost", "1", "--out", str(tmp_path),
                 "--api-base", "http://127.0.0.1:9/v1"]) == 2
    assert "no price is known" in capsys.readouterr().err


def test_context_window_with_api_base_reaches_both_models_of_the_rlm_methods() -> None:
    # a served model litellm knows nothing of: without the window the rlm methods fit no limit to it (and a small
    # model gets no first reading); --context-window is the only place the user states it
    import argparse

    from rlmnb._eval.command import add_arguments, spec_from_args

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    base = ["--task", "niah", "--sizes", "8k", "-m", "openai/local", "-s", "openai/local-sub", "--context-window",
            "16000"]
    spec = spec_from_args(parser.parse_args([*base, "--api-base", "http://127.0.0.1:1/v1"]))
    assert spec.setup.model.context_window == 16_000 and spec.setup.sub_model.context_window == 16_000
    assert spec.setup.context_window == 16_000
    spec = spec_from_args(parser.parse_args(base))  # a provider's model: litellm's window stands; direct's is set
    assert isinstance(spec.setup.model, str) and spec.setup.context_window == 16_000


def test_request_timeout_reaches_both_models_and_a_bad_one_is_refused_before_any_call(
        capsys: pytest.CaptureFixture[str]) -> None:
    # a 1.5B model on this CPU reads a 12,849-token part in 603 s, past the local default of 600 s (recorded,
    # RULER cwe at 32K): the user gives the slow server more time for every request of the evaluation
    import argparse

    from rlmnb._eval.command import add_arguments, spec_from_args

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    base = ["--task", "niah", "--sizes", "8k", "-m", "openai/local", "-s", "openai/local-sub",
            "--api-base", "http://127.0.0.1:1/v1"]
    spec = spec_from_args(parser.parse_args([*base, "--request-timeout", "1200"]))
    assert spec.setup.model.timeout == 1200 and spec.setup.sub_model.timeout == 1200
    assert spec_from_args(parser.parse_args(base)).setup.model.timeout == 600  # a server on this machine
    for bad in ("0", "-5", "soon", "nan", "inf"):
        with pytest.raises(SystemExit):
            parser.parse_args([*base, "--request-timeout", bad])
        assert "is not a number of seconds: give one above 0" in capsys.readouterr().err


def test_policies_reach_the_rlm_methods_and_a_bad_name_is_refused_before_any_call() -> None:
    # an ablation runs the same tasks with one policy set or another (issue 44)
    import argparse

    from rlmnb._eval.command import add_arguments, spec_from_args
    from rlmnb._ground.errors import ConfigError

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    base = ["--task", "niah", "--sizes", "8k", "-m", "openai/local"]
    assert spec_from_args(parser.parse_args([*base, "--policies", "paper"])).setup.settings["policies"] == "paper"
    named = spec_from_args(parser.parse_args([*base, "--policies", "look_first,final_answer"]))
    assert named.setup.settings["policies"] == ("look_first", "final_answer")
    assert spec_from_args(parser.parse_args([*base, "--policies", "all"])).setup.settings["policies"] == "all"
    assert "policies" not in spec_from_args(parser.parse_args(base)).setup.settings
    with pytest.raises(ConfigError):
        spec_from_args(parser.parse_args([*base, "--policies", "look_first,bogus"]))
    with pytest.raises(ConfigError):
        spec_from_args(parser.parse_args([*base, "--policies", ","]))
