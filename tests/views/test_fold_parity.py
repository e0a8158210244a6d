"""The two folds of a run agree: the Python view model (`rlmnb.views.RunTree`) and the extension's
`fold.ts` (compiled here and run by node) give the same figures for the same recorded trajectories.

Trajectories: the tutorial notebooks' saved runs, a run with a failing batch, single calls and a child
run, a run whose calls queue for two slots, a 10,000-call run, that run cut off mid-batch (a kernel that
died), a run interrupted with calls in flight and queued, the same runs in the old format (no `sub_call_sent`
events, no `queued_s`), runs whose calls read the provider's prompt cache, a root asked again (an empty reply, a repeated step), a run trimmed to its window (turns dropped, an output cut), and
resumed runs (live from a batch's
sub-call, from a root request, and never live). Figures compared:
the meters (counts, in flight and queued, tokens, prompt-cache tokens and saving, cost, unpriced, root calls),
every run (status, label, depth, parent, reason, notes, wall time), every turn (flags, timings, notes, the
pending text, from the journal or not) and every sub-call group and call (counts, tokens, cost, cached, from
the journal, retried, latency and queue percentiles, wall, refusal), and a resumed run's mark (where it sits).
"""

from __future__ import annotations

import _thread
import copy
import dataclasses
import json
import math
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import code

from rlmnb import RLM
from rlmnb._engine.replies import extract_code
from rlmnb._ground.prompts import load
from rlmnb._ground.usage import CallUsage
from rlmnb._models.base import Completion
from rlmnb.events import Trajectory
from rlmnb.testing import ScriptedLM
from rlmnb.views import RunTree, compact_trajectory
from rlmnb.views._format import pending_turn_text, policy_note, replayed_turn

ROOT = Path(__file__).resolve().parents[2]
EXTENSION = ROOT / "extension"
FIGURES_SCRIPT = Path(__file__).with_name("fold_figures.cjs")
MIME = "application/vnd.rlmnb.trajectory+json"
CALLS = 10_000


@pytest.fixture(scope="module")
def ts_fold(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fold.ts and format.ts compiled to CommonJS, for node to require."""
    tsc = EXTENSION / "node_modules" / ".bin" / "tsc"
    node = shutil.which("node")
    missing = ("node is not installed" if node is None else
               None if tsc.exists() else "the extension's npm packages are not installed (make extension)")
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the fold parity test: {missing}")
        pytest.skip(missing)
    out = tmp_path_factory.mktemp("fold-js")
    subprocess.run([str(tsc), "--module", "commonjs", "--target", "ES2022", "--lib", "DOM,ES2022", "--strict",
                    "--skipLibCheck", "--outDir", str(out), str(EXTENSION / "src" / "fold.ts"),
                    str(EXTENSION / "src" / "format.ts")], check=True, cwd=EXTENSION, timeout=300)
    return out


# ---- the trajectories ------------------------------------------------------------------------------
def _notebook_runs() -> list[tuple[str, dict[str, Any]]]:
    runs = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        outputs = [o for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])]
        payloads = [o["data"][MIME] for o in outputs if MIME in o.get("data", {})]
        runs.extend((f"{path.stem}[{i}]", p) for i, p in enumerate(payloads))
    return runs


def _sub_reply(messages: list[dict[str, Any]]) -> str:
    prompt = messages[-1]["content"]
    if prompt == "q13":
        raise ValueError("the sub-model refused q13")
    return f"reply to {prompt}"


def _mixed_run() -> dict[str, Any]:
    root = ScriptedLM([
        code("print(len(inputs['text']))"),
        code("r = llm_query_batched([f'q{i}' for i in range(60)])\nc = rlm_query('count the words')\n"
             "print(sum(x.startswith('[error]') for x in r), c)"),
        code("a = llm_query('one more')\nb = llm_query('and another')\nsubmit({'errors': 1, 'child': c})"),
    ], name="root-model")
    child = ScriptedLM([code("n = llm_query('how many words?')\nprint(n)"), code("submit('two words')")],
                       name="child-model")
    result = RLM(root, ScriptedLM(_sub_reply, name="sub-model"), sandbox="local", max_depth=2, child_model=child,
                 max_llm_calls=100).run("How many errors?", text="hello world")
    data = result.trajectory.to_dict()
    finished = [e for e in data["events"] if e["kind"] == "sub_call_finished"]
    finished[3]["meta"] = {"retries": 2, "rate_limited": 1}  # as an adapter reports a call that met a 429
    finished[4]["meta"] = {"retries": 1}
    finished[5]["usage"]["cost_usd"] = None  # a call without a price
    finished[6]["usage"]["cost_usd"] = 0.0125
    return data


def _asked_again_run() -> dict[str, Any]:
    """A root asked again twice: once for an empty reply, once for a reply that would run turn 1's code."""
    look = code("print(len(inputs['text']))")
    root = ScriptedLM(["", look, look, code("print(inputs['text'][:5])"), code("submit('hello')")], name="root-model")
    result = RLM(root, ScriptedLM(_sub_reply, name="sub-model"), sandbox="local",
                 policies=["empty_reply", "repeat_breaker", "final_answer"]).run("Greeting?", text="hello world")
    return result.trajectory.to_dict()


def _stalled_run() -> dict[str, Any]:
    """A root asked again (twice, `repeat_asks`) for a reply that would run turn 1's code, which sends that code
    again each time: the turns end."""
    look = code("print(len(inputs['text']))")
    root = ScriptedLM([look, look, look, look, "hello"], name="root-model")
    result = RLM(root, ScriptedLM(_sub_reply, name="sub-model"), sandbox="local",
                 policies=["repeat_breaker", "final_answer"]).run("Greeting?", text="hello world")
    return result.trajectory.to_dict()


def _trimmed_run() -> dict[str, Any]:
    """A conversation over the window: middle turns dropped, then an output larger than the window cut to fit."""
    steps = [code(f"print('{c}' * 3000)") for c in "vwx"]
    steps += [code("print(' '.join(str(i) for i in range(9000)))"), code("submit('done')")]
    root = ScriptedLM(steps, name="root-model")
    result = RLM(root, ScriptedLM(_sub_reply, name="sub-model"), sandbox="local", max_context_tokens=4000,
                 max_output_chars=60_000, evidence_check=False).run("Which?", text="hello world")
    return result.trajectory.to_dict()


def _echoed_run() -> dict[str, Any]:
    """A root asked again because its reply only copied the request back."""
    def root(messages: list[dict[str, Any]]) -> str:
        last = str(messages[-1]["content"])
        if sum(1 for m in messages if m["role"] == "assistant") == 1 and last != load("echo_retry"):
            return last  # turn 2: the model sends the request back
        return code("submit('hello')") if "hello" in last else code("print(inputs['text'][:5])")

    result = RLM(ScriptedLM(root, name="root-model"), ScriptedLM(_sub_reply, name="sub-model"),
                 sandbox="local", policies=["look_first", "empty_reply"]).run("Greeting?", text="hello world")
    return result.trajectory.to_dict()


def _empty_replied_run() -> dict[str, Any]:
    """A root whose first reply is empty, under the default profile: the turn passes with nothing to run."""
    root = ScriptedLM(["", code("print(inputs['text'][:5])"), code("submit('hello')")], name="root-model")
    result = RLM(root, ScriptedLM(_sub_reply, name="sub-model"), sandbox="local").run("Greeting?", text="hello world")
    return result.trajectory.to_dict()


def _prose_answered_run() -> dict[str, Any]:
    """A root that prints a value, then says it in prose without code: `prose_answer` takes the reply."""
    root = ScriptedLM([code("print(inputs['text'][:5])"), "hello"], name="root-model")
    result = RLM(root, ScriptedLM(_sub_reply, name="sub-model"), sandbox="local").run("Greeting?", text="hello world")
    return result.trajectory.to_dict()


def _queued_run(calls: int, concurrency: int) -> dict[str, Any]:
    root = ScriptedLM([code(f"r = llm_query_batched([f'q{{i}}' for i in range({calls})])"),
                       code("submit(len(r))")])
    return RLM(root, ScriptedLM(lambda m: "x " * 3, name="sub"), sandbox="local", max_concurrency=concurrency,
               min_concurrency=1, cache=False, max_llm_calls=calls + 10).run("q", text="t").trajectory.to_dict()


def _interrupted_run() -> dict[str, Any]:
    """A run the user interrupted (Ctrl-C) while its batch had calls in flight and calls queued."""
    replied = 0

    def sub(messages: list[dict[str, Any]]) -> str:
        nonlocal replied
        replied += 1
        if replied == 30:
            _thread.interrupt_main()  # what Ctrl-C in the terminal or the notebook's stop button does
        return "x"

    root = ScriptedLM([code("r = llm_query_batched([f'q{i}' for i in range(100)])"), code("submit(len(r))")])
    result = RLM(root, ScriptedLM(sub, name="sub", latency=0.02), sandbox="local", max_concurrency=4, cache=False,
                 max_llm_calls=200).run("q", text="t")
    assert result.status == "interrupted"
    return result.trajectory.to_dict()


class _PromptCachedLM(ScriptedLM):
    """A scripted model whose calls read `cached(messages)` input tokens from a prompt cache, billed at a tenth."""

    def __init__(self, replies: Any, cached: Any, name: str) -> None:
        super().__init__(replies, name=name)
        self.cached = cached

    def complete(self, messages: list[Any], **params: Any) -> Completion:
        done = super().complete(messages, **params)
        tokens, hits = done.usage.input_tokens, self.cached(messages)
        usage = CallUsage(tokens, done.usage.output_tokens, (tokens - hits) * 1e-6 + hits * 1e-7,
                          cached_input_tokens=hits, saved_usd=hits * 9e-7)
        return dataclasses.replace(done, usage=usage)


def _prompt_cached_run() -> dict[str, Any]:
    """Root replies and sub-calls that read the provider's prompt cache (tokens and the money saved)."""
    root = _PromptCachedLM([code("r = llm_query_batched([f'q{i}' for i in range(6)])\nprint(r[0])"),
                            code("submit(len(r))")], lambda ms: 896 if len(ms) > 2 else 0, "root")
    sub = _PromptCachedLM(lambda ms: "ok", lambda ms: 256 if ms[-1]["content"] in ("q1", "q4") else 0, "sub")
    return RLM(root, sub, sandbox="local", cache=False).run("q", text="t").trajectory.to_dict()


FAN_OUT = code("answers = llm_query_batched([f'item {i}: ' + inputs['words'][i] for i in range(20)])\n"
               "print(len(answers))")
RESUME_SCRIPT = [code("print(inputs['words'][:3])"), FAN_OUT, "no code yet", code("submit('|'.join(answers))")]


def _resumed_runs(folder: Path) -> dict[str, dict[str, Any]]:
    """A run resumed from its journal cut mid-batch (live from a sub-call), one resumed after its turns ran out
    (live from a root request), and one resumed from a whole journal (never live)."""
    words = [f"w{i}" for i in range(20)]

    def models(script: list[str]) -> tuple[ScriptedLM, ScriptedLM]:
        root = ScriptedLM(lambda ms: script[sum(1 for m in ms if m.get("role") == "assistant")], name="root")
        return root, ScriptedLM(lambda ms: str(ms[-1]["content"]).split(": ", 1)[1].upper(), name="sub")

    script = [RESUME_SCRIPT[0], RESUME_SCRIPT[1], RESUME_SCRIPT[3]]
    whole = RLM(*models(script), sandbox="local", journal=str(folder)).run("Shout", words=words)
    cut = RLM(*models(script), sandbox="local", journal=str(folder)).run("Shout", words=words)
    assert whole.journal is not None and cut.journal is not None
    lines = cut.journal.read_text(encoding="utf-8").splitlines(keepends=True)
    finished = [i for i, line in enumerate(lines) if '"kind": "sub_call_finished"' in line]
    cut.journal.write_text("".join(lines[:finished[11] + 1]), encoding="utf-8")  # killed after 12 answers
    short = RLM(*models(RESUME_SCRIPT), sandbox="local", journal=str(folder), max_iterations=3).run(
        "Shout", words=words)
    assert short.status == "fallback" and short.journal is not None
    out = {}
    for name, journal, turns in (("resumed-batch", cut.journal, 20), ("resumed-root", short.journal, 4),
                                 ("resumed-whole", whole.journal, 20)):
        result = RLM(*models(script if turns == 20 else RESUME_SCRIPT), sandbox="local", journal=False,
                     max_iterations=turns).resume(journal, words=words)
        assert result.status == "submitted", (name, result.error)
        out[name] = result.trajectory.to_dict()
    return out


def _cut(data: dict[str, Any], fraction: float) -> dict[str, Any]:
    """The run as saved when its kernel died: events up to `fraction` of the way through its sub-calls."""
    events = data["events"]
    finished = [i for i, e in enumerate(events) if e["kind"] == "sub_call_finished"]
    return {**data, "events": events[:finished[int(len(finished) * fraction)]]}


def _old_format(data: dict[str, Any]) -> dict[str, Any]:
    """The run as an rlmnb that did not record slots saved it: no sub_call_sent events, no queued_s."""
    events = [copy.deepcopy(e) for e in data["events"] if e["kind"] != "sub_call_sent"]
    for e in events:
        e.pop("queued_s", None)
    return {**data, "events": events}


def _interleaved(data: dict[str, Any]) -> dict[str, Any]:
    """Calls started and sent in order but still waiting: the slots of a batch cut off while it queued."""
    events = data["events"]
    first = next(i for i, e in enumerate(events) if e["kind"] == "sub_call_finished")
    return {**data, "events": events[:first + 3]}


@pytest.fixture(scope="module")
def trajectories(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    mixed, queued, big, interrupted = _mixed_run(), _queued_run(40, 2), _queued_run(CALLS, 64), _interrupted_run()
    runs = dict(_notebook_runs())
    runs.update({
        "mixed": mixed, "mixed-compact": compact_trajectory(Trajectory.from_dict(mixed)),
        "mixed-old": _old_format(mixed), "queued": queued, "queued-old": _old_format(queued),
        "queued-cut": _interleaved(queued), "queued-cut-old": _old_format(_interleaved(queued)),
        "10k": big, "10k-cut": _cut(big, 0.5), "10k-cut-old": _old_format(_cut(big, 0.5)),
        "mixed-cut": _cut(mixed, 0.4), "interrupted": interrupted, "interrupted-old": _old_format(interrupted),
        "prompt-cached": _prompt_cached_run(), "asked-again": _asked_again_run(), "stalled": _stalled_run(), "echoed": _echoed_run(),
        "prose-answered": _prose_answered_run(), "empty-replied": _empty_replied_run(), "trimmed": _trimmed_run(),
        **_resumed_runs(tmp_path_factory.mktemp("journals")),
    })
    assert sum(e["kind"] == "sub_call_finished" for e in big["events"]) == CALLS
    return runs


# ---- the Python fold's figures, named as fold_figures.cjs names the TypeScript ones ----------------------
def _group(tree: RunTree, key: str) -> dict[str, Any]:
    g = tree.group_view(key)
    calls = [{"id": c["call_id"], "done": c["done"], "error": c["error"], "input_tokens": c["input_tokens"],
              "output_tokens": c["output_tokens"], "cost": c["cost"], "latency": c["latency"],
              "queued": c["queued"], "sent": c["sent"], "cached": c["cached"], "retries": c["retries"],
              "rate_limited": c["rate_limited"], "prompt_chars": c["prompt_chars"], "journal": c["journal"],
              "cached_input_tokens": c["cached_input_tokens"], "saved": c["saved"]} for c in tree.call_views(key)]
    shown = ("operator", "items", "packs", "reasks", "failures", "stopped")
    return {"kind": g["kind"], "size": g["size"], "model": g["model"], "errors": g["errors"], "wall": g["wall"],
            "refused": g["refused"], "map": {k: g["map"][k] for k in shown} if g["map"] else None,
            "started": g["started"], "finished": g["finished"], "in_flight": g["in_flight"], "queued": g["queued"],
            "retried": g["retried"], "rate_limited": g["rate_limited"], "cached": g["cached"],
            "input_tokens": g["input_tokens"], "output_tokens": g["output_tokens"], "cost": g["cost"],
            "unpriced": g["unpriced"], "p50": g["p50"], "p95": g["p95"], "queued_p50": g["queued_p50"],
            "queued_p95": g["queued_p95"], "journal": g["journal"], "cached_input_tokens": g["cached_input_tokens"],
            "saved": g["saved"], "calls": calls}


def python_figures(payload: dict[str, Any]) -> dict[str, Any]:
    tree = RunTree.from_trajectory(Trajectory.from_dict(payload))
    tree.opened = payload.get("opened")  # when the user's cell started, as the live widget set it
    m = tree.meters_view(now=0.0)
    runs = {}
    for run_id in tree.runs:
        run = tree.run_view(run_id, now=0.0)
        turns = []
        for n in tree.turn_numbers(run_id):
            t = tree.turn_view(run_id, n)
            keys = [key for kind, key in tree.turn_items(run_id, n) if kind == "group"]
            tokens = t["reply_usage"]
            turns.append({
                "turn": n, "max_turns": t["max_turns"] or None, "executed": t["executed"],
                "submitted": t["submitted"], "error": t["error"], "error_type": t["error_type"],
                "timed_out": t["timed_out"], "restarted": t["restarted"], "duration": t["duration"],
                "reply_latency": t["reply_latency"],
                "reply_tokens": [tokens.get("input_tokens", 0), tokens.get("output_tokens", 0)]
                if t["reply"] is not None else None,
                "reply_cache": [tokens.get("cached_input_tokens", 0), tokens.get("saved_usd", 0.0)],
                "replayed": replayed_turn(tree.resumed_view(run_id), n),
                "notes": [list(note) for note in t["notes"]],
                "pending": pending_turn_text(t["executed"], t["reply"] is not None, run["status"],
                                             code=t["code"] is not None or t["reply"] is None
                                             or extract_code(t["reply"]).code is not None),
                "groups": [_group(tree, key) for key in dict.fromkeys(keys)]})
        node = tree.runs[run_id]
        runs[run_id] = {
            "parent": run["parent_run_id"], "parent_turn": node.parent_turn, "depth": run["depth"],
            "label": run["label"], "status": run["status"], "question": run["question"], "model": run["model"],
            "sub_model": run["sub_model"], "reason": run["reason"], "error": run["error"],
            "elapsed": run["elapsed"] if node.finished is not None else None,
            "notes": [note.strip() for note in run["notes"]], "turns": turns}
    mark = tree.resumed_view()
    shown = ("source", "root_answers", "sub_answers", "served_root", "served_sub", "live", "run_id", "turn", "within")
    return {"root": tree.root_id, "resumed": {k: mark[k] for k in shown} if mark is not None else None,
            "meters": {"turns": m["turns"], "sub_calls": m["sub_calls"], "sub_calls_done": m["sub_calls_done"],
                       "sub_errors": m["sub_errors"], "in_flight": m["sub_calls_in_flight"],
                       "queued": m["sub_calls_queued"], "input_tokens": m["input_tokens"],
                       "output_tokens": m["output_tokens"], "cost": m["cost"], "unpriced": m["unpriced"],
                       "root_calls": m["root_calls"], "cached_input_tokens": m["cached_input_tokens"],
                       "saved": m["saved"]},
            "runs": runs}


def _differences(py: Any, ts: Any, where: str = "") -> list[str]:
    if isinstance(py, dict) and isinstance(ts, dict):
        keys = list(dict.fromkeys([*py, *ts]))
        return [d for k in keys for d in _differences(py.get(k, "<missing>"), ts.get(k, "<missing>"), f"{where}.{k}")]
    if isinstance(py, list | tuple) and isinstance(ts, list | tuple):
        if len(py) != len(ts):
            return [f"{where}: {len(py)} items in Python, {len(ts)} in TypeScript"]
        return [d for i, (a, b) in enumerate(zip(py, ts, strict=True)) for d in _differences(a, b, f"{where}[{i}]")]
    if isinstance(py, float | int) and isinstance(ts, float | int) and not isinstance(py, bool) \
            and not isinstance(ts, bool) and math.isclose(py, ts, rel_tol=1e-9, abs_tol=1e-9):
        return []
    return [] if py == ts else [f"{where}: Python {py!r}, TypeScript {ts!r}"]


def ts_figures(ts_fold: Path, payloads: list[dict[str, Any]], folder: Path) -> list[dict[str, Any]]:
    files = []
    for i, payload in enumerate(payloads):
        files.append(folder / f"trajectory-{i}.json")
        files[-1].write_text(json.dumps(payload), encoding="utf-8")
    out = subprocess.run(["node", str(FIGURES_SCRIPT), str(ts_fold), *map(str, files)], check=True,
                         capture_output=True, text=True, timeout=300)
    figures: list[dict[str, Any]] = json.loads(out.stdout)
    return figures


def test_the_python_and_typescript_folds_give_the_same_figures(
        ts_fold: Path, trajectories: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    names = list(trajectories)
    ts = ts_figures(ts_fold, [trajectories[n] for n in names], tmp_path)
    report = []
    for name, figures in zip(names, ts, strict=True):
        differences = _differences(python_figures(trajectories[name]), figures)
        report.extend(f"{name}{d}" for d in differences[:20])
    assert not report, "\n".join(report)


def test_the_comparison_sees_a_figure_that_differs(ts_fold: Path, trajectories: dict[str, dict[str, Any]],
                                                    tmp_path: Path) -> None:
    """The parity test can fail: one token more in one call's record shows up as a difference."""
    payload = copy.deepcopy(trajectories["mixed"])
    [figures] = ts_figures(ts_fold, [payload], tmp_path)
    call = next(e for e in payload["events"] if e["kind"] == "sub_call_finished")
    call["usage"]["output_tokens"] = (call["usage"].get("output_tokens") or 0) + 1
    differences = _differences(python_figures(payload), figures)
    assert differences and all("output_tokens" in d for d in differences)


def _acted(trajectory: dict[str, Any]) -> list[tuple[int, str, str]]:
    """(turn, policy, action) of every `policy_acted` event of a recorded trajectory, in order."""
    return [(e["turn"], e["policy"], e["action"]) for e in trajectory["events"] if e["kind"] == "policy_acted"]


def test_the_trajectories_cover_what_the_parity_test_claims(trajectories: dict[str, dict[str, Any]]) -> None:
    kinds = {name: {e["kind"] for e in t["events"]} for name, t in trajectories.items()}
    assert any(n.startswith("0") for n in kinds) and "map_started" in set().union(*kinds.values())
    assert "sub_call_sent" in kinds["queued-cut"] and "sub_call_sent" not in kinds["queued-cut-old"]
    statuses = [e["status"] for e in trajectories["interrupted"]["events"] if e["kind"] == "run_finished"]
    assert statuses == ["interrupted"]
    assert "run_finished" not in kinds["10k-cut"] and "run_started" in kinds["10k-cut"]
    old = [e for e in trajectories["10k-cut-old"]["events"] if e["kind"] == "sub_call_finished"]
    assert old and not any("queued_s" in e for e in old)
    cached = [e["usage"] for e in trajectories["prompt-cached"]["events"] if e["kind"] == "sub_call_finished"]
    assert sum(u.get("cached_input_tokens", 0) for u in cached) == 512 and any(u.get("saved_usd") for u in cached)
    # the policies that asked again or ended the turns, as PolicyActed events, and each one's note on its turn
    assert _acted(trajectories["asked-again"]) == [(1, "empty_reply", "ask_again"), (2, "repeat_breaker", "ask_again")]
    trimmed = [e for e in trajectories["trimmed"]["events"] if e["kind"] == "turns_trimmed"]
    assert any(e["dropped"] for e in trimmed) and any(e["clipped"] for e in trimmed)
    assert _acted(trajectories["stalled"]) == [(2, "repeat_breaker", "ask_again"), (2, "repeat_breaker", "ask_again"),
                                               (2, "repeat_breaker", "end_turns"), (2, "final_answer", "end_turns")]
    assert _acted(trajectories["echoed"]) == [(1, "look_first", "send_back"), (2, "empty_reply", "ask_again")]
    # a turn answered in prose ran no code and has none left to run: no "did not finish" in either fold
    assert _acted(trajectories["prose-answered"]) == [(2, "prose_answer", "answer")]
    answered = next(iter(python_figures(trajectories["prose-answered"])["runs"].values()))["turns"]
    assert [t["pending"] for t in answered] == [None, None]
    # an empty reply is a reply: its turn has nothing to run, and the run went on to answer
    replied = next(iter(python_figures(trajectories["empty-replied"])["runs"].values()))["turns"]
    assert [t["pending"] for t in replied] == [None, None, None]
    echoed = [n for e in trajectories["echoed"]["events"] if e["kind"] == "model_reply" for n in e["notes"]]
    assert echoed == ["empty", "echo"]  # how the reply was read; the ask is the policy's event
    for name in ("asked-again", "stalled", "echoed"):
        turns = next(iter(python_figures(trajectories[name])["runs"].values()))["turns"]
        for e in trajectories[name]["events"]:
            if e["kind"] == "policy_acted":
                assert list(policy_note(e["policy"], e["action"], e["detail"])) in turns[e["turn"] - 1]["notes"]
    # a turn asked again counts both of its calls (the fold parity test holds the extension to the same)
    replies = [e for e in trajectories["asked-again"]["events"] if e["kind"] == "model_reply"]
    turns = next(iter(python_figures(trajectories["asked-again"])["runs"].values()))["turns"]
    for n in (1, 2):
        calls = [e for e in replies if e["turn"] == n]
        assert len(calls) == 2
        assert turns[n - 1]["reply_tokens"] == [sum(e["usage"]["input_tokens"] for e in calls),
                                                sum(e["usage"]["output_tokens"] for e in calls)]
        assert turns[n - 1]["reply_latency"] == pytest.approx(sum(e["latency_s"] for e in calls))
    marks = {name: [e for e in trajectories[name]["events"] if e["kind"] == "run_resumed"]
             for name in ("resumed-batch", "resumed-root", "resumed-whole")}
    assert [len(m) for m in marks.values()] == [1, 1, 1]
    batch, root, whole = (python_figures(trajectories[name])["resumed"] for name in marks)
    assert (batch["turn"], batch["within"], batch["served_sub"]) == (2, True, 12)
    assert (root["turn"], root["within"], root["served_root"]) == (4, False, 3)
    assert (whole["turn"], whole["live"]) == (None, False)
