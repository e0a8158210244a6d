"""One contract for every sandbox: the same runs, through RLM(...).run with scripted models, must read
the same whether the code runs in this process ("local") or in a separate kernel ("kernel").

Kernel runs are checked for leftovers after every test: no sandbox process (the warm spare excepted),
no transfer directory in /dev/shm, no kernel temp dir.
"""

from __future__ import annotations

import _thread
import asyncio
import dataclasses
import datetime
import decimal
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from sandbox_support import EchoHost, code, observations

from rlmnb import RLM, ConfigError
from rlmnb._sandbox import create_sandbox
from rlmnb._sandbox.kernel.process import SPAWNER_THREAD
from rlmnb._sandbox.kernel.warm import pool
from rlmnb.events import CodeExecuted, GuardRejected, SubCallStarted
from rlmnb.testing import ScriptedLM

pytestmark = pytest.mark.usefixtures("stop_the_spare")


def run(kind: str, replies: list[str], *, sub: Any = None, question: str = "What is it?",
        inputs: dict[str, Any] | None = None, **kw: Any) -> tuple[Any, ScriptedLM]:
    root = ScriptedLM(replies, name="root")
    kw.setdefault("evidence_check", False)  # the scripts submit words they never printed ('ok')
    rlm = RLM(root, sub or ScriptedLM(lambda m: "sub-reply", name="sub"), sandbox=kind, **kw)
    return rlm.run(question, **(inputs if inputs is not None else {"text": "alpha beta gamma"})), root


def first_step(body: str) -> list[str]:
    """A harmless first step, so the next reply may submit (the first-turn guard)."""
    return [code("print('looking')"), code(body)]


# ---- inputs -------------------------------------------------------------------------------------------------
def _all_kinds(tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "notes.txt").write_text("héllo\nworld\n", encoding="utf-8")
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02binary")
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("first", encoding="utf-8")
    (folder / "sub" / "b.txt").write_text("second", encoding="utf-8")
    frame = pd.DataFrame({"n": [1, 2, 3], "x": [0.5, np.nan, 2.5], "s": ["a", None, "c"],
                          "o": pd.Series(["p", "q", "r"], dtype=object),
                          "t": pd.to_datetime(["2024-01-01", "2024-01-02", "2024-01-03"])},
                         index=pd.Index([10, 20, 30], name="id"))
    return {
        "text": "naïve text ✓", "raw": b"\x00\xffbytes", "buf": bytearray(b"mutable"),
        "notes": tmp_path / "notes.txt", "blob": tmp_path / "blob.bin", "docs": folder,
        "frame": frame, "series": pd.Series([1.5, 2.5], index=["u", "v"], name="vals"),
        "table": pa.table({"k": ["x", "y"], "v": [1, 2]}), "matrix": np.arange(6, dtype=np.int32).reshape(2, 3),
        "items": [1, "two", [3, 4], {"five": 5}], "pair": (1, 2), "mapping": {"a": [1, 2], "b": {"c": "d"}},
        "count": 42, "price": decimal.Decimal("9.99"), "day": datetime.date(2024, 5, 1), "nothing": None,
    }


_DESCRIBE = r'''
import json, copy
def facts(v):
    t = type(v).__name__
    if t == "DataFrame":
        return [t, list(map(str, v.columns)), [str(d) for d in v.dtypes], v.index.name, list(v.index),
                v["n"].tolist(), v["s"].isna().tolist(), str(v["t"].iloc[1].date())]
    if t == "Series":
        return [t, v.name, list(v.index), v.tolist()]
    if t == "Table":
        return [t, v.column_names, v.to_pydict()]
    if t == "ndarray":
        return [t, str(v.dtype), list(v.shape), v.tolist(), v.flags.writeable]
    if t in ("memoryview",):
        return [t, bytes(v).hex(), v.readonly]
    if t == "bytes":
        return [t, v.hex()]
    if t == "DirectoryView":
        return [t, sorted(v), v["sub/b.txt"]]
    if t in ("ReadOnlySequence", "ReadOnlyMapping"):
        return [t, copy.deepcopy(v)]
    return [t, v if isinstance(v, (str, int, type(None))) else str(v)]
report = {name: facts(inputs[name]) for name in inputs}
print(sorted(report))
'''


def test_inputs_of_every_kind_read_the_same(kind: str, tmp_path: Path) -> None:
    values = _all_kinds(tmp_path)
    result, _ = run(kind, [code(_DESCRIBE), code("submit(report)")], inputs=values)
    assert result.status == "submitted", result.reason
    got = result.answer
    assert sorted(got) == sorted(values)
    assert got["text"] == ["str", "naïve text ✓"]
    assert got["raw"] == ["bytes", "00ff6279746573"]
    assert got["buf"] == ["memoryview", b"mutable".hex(), True]
    assert got["notes"] == ["str", "héllo\nworld\n"]
    assert got["blob"] == ["bytes", b"\x00\x01\x02binary".hex()]
    assert got["docs"] == ["DirectoryView", ["a.txt", "sub/b.txt"], "second"]
    assert got["frame"] == ["DataFrame", ["n", "x", "s", "o", "t"],
                            ["int64", "float64", str(values["frame"]["s"].dtype), "object", "datetime64[us]"],
                            "id", [10, 20, 30], [1, 2, 3], [False, True, False], "2024-01-02"]
    assert got["series"] == ["Series", "vals", ["u", "v"], [1.5, 2.5]]
    assert got["table"] == ["Table", ["k", "v"], {"k": ["x", "y"], "v": [1, 2]}]
    assert got["matrix"] == ["ndarray", "int32", [2, 3], [[0, 1, 2], [3, 4, 5]], False]
    assert got["items"] == ["ReadOnlySequence", [1, "two", [3, 4], {"five": 5}]]
    assert got["pair"] == ["ReadOnlySequence", [1, 2]]
    assert got["mapping"] == ["ReadOnlyMapping", {"a": [1, 2], "b": {"c": "d"}}]
    assert got["count"] == ["int", 42]
    assert got["price"] == ["Decimal", "9.99"]
    assert got["day"] == ["date", "2024-05-01"]
    assert got["nothing"] == ["NoneType", None]


def test_inputs_are_read_only_and_the_users_objects_unchanged(kind: str) -> None:
    df = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})
    arr = np.arange(3)
    items = [1, 2]
    before = df.copy(deep=True)
    body = ("t = inputs['t']\nt.iloc[0, 0] = 99\nt['c'] = 1\ndel t['b']\n"
            "errors = []\n"
            "for action in (lambda: inputs['arr'].__setitem__(0, 5), lambda: inputs['items'].append(3),\n"
            "               lambda: inputs.__setitem__('t', 1)):\n"
            "    try:\n        action()\n    except Exception as exc:\n        errors.append(type(exc).__name__)\n"
            "print(errors)")
    result, root = run(kind, [code(body), code("submit([int(inputs['t']['a'].sum()), list(inputs['t'].columns)])")],
                       inputs={"t": df, "arr": arr, "items": items})
    assert result.answer == [6, ["a", "b"]]
    assert "['ValueError', 'TypeError', 'AttributeError']" in observations(root)[0]
    pd.testing.assert_frame_equal(df, before)
    assert arr.tolist() == [0, 1, 2] and items == [1, 2]


# ---- sub-calls ----------------------------------------------------------------------------------------------
def test_llm_query_goes_through_the_host_budget_and_events(kind: str) -> None:
    sub = ScriptedLM(lambda m: m[-1]["content"].upper(), name="sub")
    result, _ = run(kind, first_step("r = llm_query('abc ✓')\nprint(r)") + [code("submit(r)")], sub=sub)
    assert result.answer == "ABC ✓"
    assert result.usage.sub_calls == 1 == len(sub.requests)
    assert [e.prompt for e in result.trajectory.of(SubCallStarted)] == ["abc ✓"]


def test_llm_query_batched_keeps_order_and_reports_failed_slots(kind: str) -> None:
    def reply(messages: list[dict[str, str]]) -> str:
        prompt = messages[-1]["content"]
        if "bad" in prompt:
            raise ValueError(f"cannot answer {prompt}")
        return f"ok:{prompt}"

    body = "rs = llm_query_batched(['p1', 'bad2', 'p3'])\nprint(rs)"
    result, _ = run(kind, first_step(body) + [code("submit(rs)")], sub=ScriptedLM(reply))
    assert result.answer == ["ok:p1", "[error] ValueError: cannot answer bad2", "ok:p3"]
    assert result.usage.sub_calls == 3


def test_sub_calls_from_many_threads_never_cross(kind: str) -> None:
    body = ("from concurrent.futures import ThreadPoolExecutor\n"
            "with ThreadPoolExecutor(8) as ex:\n"
            "    got = list(ex.map(lambda i: llm_query(f'q{i}'), range(24)))\n"
            "print(all(g == f'a:q{i}' for i, g in enumerate(got)))")
    result, root = run(kind, [code(body), code("submit(got)")],
                       sub=ScriptedLM(lambda m: "a:" + m[-1]["content"]), max_llm_calls=30)
    assert result.answer == [f"a:q{i}" for i in range(24)]
    assert "True" in observations(root)[0]


def test_sub_call_budget_exhaustion_is_an_error_the_model_sees(kind: str) -> None:
    replies = [code("r = llm_query_batched(['a'] * 5)"), code("print(llm_query('one'))"), code("submit('ok')")]
    result, root = run(kind, replies, max_llm_calls=3)
    assert result.status == "submitted" and result.usage.sub_calls == 1
    first = observations(root)[0]
    # a batch larger than the whole budget is told so (nothing is spent yet), with what to send instead
    assert "BudgetExhausted" in first and "larger than the whole sub-call budget (3 calls" in first
    assert "Send at most 3 prompts at once" in first


def test_bad_prompt_types_are_clear_errors(kind: str) -> None:
    body = ("for call in (lambda: llm_query(['a']), lambda: llm_query_batched('abc')):\n"
            "    try:\n        call()\n    except TypeError as exc:\n        print('TypeError:', exc)")
    result, root = run(kind, [code(body), code("submit(1)")])
    assert "takes a str prompt" in observations(root)[0] and "list of str prompts" in observations(root)[0]


def test_rlm_query_at_the_depth_cap_is_a_plain_sub_call_with_inputs_inlined(kind: str) -> None:
    sub = ScriptedLM(lambda m: f"saw {len(m[-1]['content'])} chars", name="sub")
    body = "a = rlm_query('Summarise', rows=inputs['t'].head(2), note='hi')\nprint(a)"
    df = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})
    result, _ = run(kind, first_step(body) + [code("submit(a)")], sub=sub, inputs={"t": df})
    prompt = sub.requests[0][-1]["content"]
    assert prompt.startswith("Summarise") and "[rows]" in prompt and "[note]\nhi" in prompt
    assert repr(df.head(2)) in prompt
    assert result.answer == f"saw {len(prompt)} chars"


def test_rlm_query_starts_a_child_run_with_its_own_sandbox(kind: str) -> None:
    child = ScriptedLM([code("print(inputs['part'])"), code("submit(inputs['part'].upper())")], name="child")
    body = "a = rlm_query('Shout', part='quiet words')\nprint(a)"
    result, _ = run(kind, first_step(body) + [code("submit(a)")], max_depth=2, child_model=child)
    assert result.status == "submitted", result.reason
    assert result.answer == "QUIET WORDS"


# ---- tools --------------------------------------------------------------------------------------------------
def test_user_tools_are_callable_with_plain_data(kind: str) -> None:
    calls: list[Any] = []

    def lookup(key: str, *, default: Any = None) -> dict[str, Any]:
        """Look a key up."""
        calls.append((key, default))
        if key == "missing":
            raise KeyError(key)
        return {"key": key, "value": [1, 2], "pair": (3, 4)}

    body = ("r = lookup('k', default=[1, 2])\nprint(r['key'], r['value'], r['pair'])\n"
            "try:\n    lookup('missing')\nexcept KeyError as exc:\n    print('KeyError', exc)")
    result, root = run(kind, [code(body), code("submit(r['key'])")], tools=[lookup])
    assert "k [1, 2] (3, 4)" in observations(root)[0]
    assert "KeyError 'missing'" in observations(root)[0]
    assert calls == [("k", [1, 2]), ("missing", None)]
    assert result.answer == "k"
    assert "Look a key up." in root.requests[0][0]["content"]


# ---- submit, FINAL, FINAL_VAR, SHOW_VARS ------------------------------------------------------------------------
def test_final_var_show_vars_and_variables_across_steps(kind: str) -> None:
    replies = [code("rows = [1, 2, 3]\nlabel = 'x'\nSHOW_VARS()"), code("FINAL_VAR('nope')"), code("FINAL_VAR('rows')")]
    result, root = run(kind, replies)
    obs = observations(root)
    assert "rows: list len=3" in obs[0] and "label: str len=1" in obs[0] and "llm_query" not in obs[0]
    assert "no variable of that name" in obs[1] and "rows" in obs[1]
    assert result.answer == [1, 2, 3]


def test_final_and_submit_cannot_be_swallowed(kind: str) -> None:
    body = "try:\n    FINAL({'a': 1})\nexcept Exception:\n    print('swallowed')\nprint('after')"
    result, _ = run(kind, first_step(body))
    assert result.answer == {"a": 1}
    executed = result.trajectory.of(CodeExecuted)[-1]
    assert "swallowed" not in executed.stdout and "after" not in executed.stdout


def test_numpy_and_pandas_values_are_submitted_as_json(kind: str) -> None:
    body = "import numpy as np\nsubmit({'n': np.int64(3), 'a': np.arange(3), 's': inputs['t']['a']})"
    result, _ = run(kind, first_step(body), inputs={"t": pd.DataFrame({"a": [1, 2]})})
    assert result.answer == {"n": 3, "a": [0, 1, 2], "s": {"0": 1, "1": 2}}


# ---- guards -------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Verdict:
    label: str
    count: int


def test_every_guard_rejects_then_a_good_submit_is_accepted(kind: str) -> None:
    replies = [code("submit({'label': 'early', 'count': 1})"),
               code("try:\n    int('x')\nexcept ValueError:\n    submit({'label': 'x', 'count': 1})"),
               code("submit(object())"),
               code("submit({'label': 'x'})"),
               code("submit({'label': 'x', 'count': '3'})")]
    result, root = run(kind, replies, schema=Verdict, policies=["look_first"])
    assert result.status == "submitted" and result.answer == Verdict("x", 3)
    rejected = result.trajectory.of(GuardRejected)
    assert [r.guard for r in rejected] == ["look_first", "exception", "jsonable", "schema"]
    obs = observations(root)
    assert all(r.reason in o for r, o in zip(rejected, obs, strict=False))  # each told why, on its turn
    assert "ValueError" in obs[1] and "plain data" in obs[2]
    assert "count: Field required" in obs[3]


# ---- errors, builtins, output ------------------------------------------------------------------------------------
def test_errors_are_observations_with_snippet_frames_only(kind: str) -> None:
    body = "import json\ndef f():\n    return json.loads('{bad')\nf()"
    result, root = run(kind, [code(body), code("raise SystemExit(3)"), code("submit(2)")])
    assert result.answer == 2
    obs = observations(root)
    assert "JSONDecodeError" in obs[0] and "line 3, in f" in obs[0] and "return json.loads" in obs[0]
    assert "json/decoder.py" not in obs[0] and "kernel_side" not in obs[0] and "runner.py" not in obs[0]
    assert "SystemExit: 3" in obs[1]


def test_a_standard_module_used_without_its_import_says_to_import_it(kind: str) -> None:
    # recorded (Qwen2.5-Coder 1.5B, RULER cwe): `collections.Counter(words)` without the import, sent twice
    body = "words = ['a', 'b', 'a']\nprint(collections.Counter(words).most_common(1))"
    result, root = run(kind, [code(body), code("print(counter)"), code("import collections\n" + body),
                              code("submit(1)")])
    obs = observations(root)
    assert "NameError: name 'collections' is not defined. Did you forget to import 'collections'?" in obs[0]
    assert "NameError: name 'counter' is not defined" in obs[1] and "import" not in obs[1]  # not a module
    assert "[('a', 2)]" in obs[2]


def test_a_name_a_module_lacks_says_which_standard_module_has_it(kind: str) -> None:
    # recorded (Qwen2.5-Coder 1.5B, `rlmnb eval` oolong_pairs 8k): `pd.compat.StringIO` on five steps
    body = "import json\nprint(json.StringIO('a|b').read())"
    result, root = run(kind, [code(body), code("import json\njson.nothing_here"), code("'abc'.StringIO"),
                              code("submit(1)")])
    obs = observations(root)
    assert "'StringIO' is in the standard library: from io import StringIO" in obs[0]
    assert "has no attribute 'nothing_here'" in obs[1] and "standard library" not in obs[1]  # nowhere else
    assert "has no attribute 'StringIO'" in obs[2] and "standard library" not in obs[2]  # not a module


def test_code_that_replaces_inputs_or_a_primitive_is_refused_and_the_real_ones_stay(kind: str) -> None:
    # recorded (Qwen2.5-Coder 1.5B, RULER vt 8k, turn 3): "Let's correct the input format" and
    # `inputs = {"context": """The grass is green. ..."""}`, an invented text; its search printed "[]" from that
    invented = ('inputs = {"context": "The grass is green."}\n'
                "print('green' in inputs['context'])")
    rebinds = "globals()['submit'] = print\ndel globals()['inputs']\nprint('rebound')"
    replies = [code(invented), code("sql = 'SELECT 1'"), code(rebinds),
               code("print(len(inputs['text']), 'green' in inputs['text'])"), code("submit(len(inputs['text']))")]
    result, root = run(kind, replies)
    obs = observations(root)
    assert "Nothing in this step ran: it assigns `inputs` (line 1)" in obs[0] and "True" not in obs[0]
    assert "it assigns `sql` (line 1)" in obs[1]
    assert "rebound" in obs[2] and "This step replaced `inputs`, `submit`" in obs[2] and "originals are back" in obs[2]
    assert "16 False" in obs[3]
    assert result.status == "submitted" and result.answer == 16
    executed = result.trajectory.of(CodeExecuted)
    assert [e.error_type for e in executed[:4]] == ["ProtectedName", "ProtectedName", "ProtectedName", None]


def test_assigned_names_finds_each_way_of_binding_a_name() -> None:
    import ast

    from rlmnb._sandbox.runner import assigned_names

    protected = {"inputs", "submit", "sql", "llm_query"}
    source = ("x = 1\nfor inputs in []: pass\nwith open('f') as sql: pass\ndef llm_query(p): return p\n"
              "def ok(inputs): return inputs\nimport json as submit\n")
    assert assigned_names(ast.parse(source), protected) == [("inputs", 2), ("sql", 3), ("llm_query", 4),
                                                           ("submit", 6)]
    assert assigned_names(ast.parse("y = inputs['text']\nprint(submit)"), protected) == []

def test_interactive_builtins_are_disabled(kind: str) -> None:
    body = ("for name in ('input', 'breakpoint', 'exit', 'quit', 'help'):\n"
            "    try:\n        eval(name + '()')\n    except RuntimeError as exc:\n"
            "        print(name, 'not available in the sandbox' in str(exc))")
    result, root = run(kind, [code(body), code("submit(1)")])
    assert observations(root)[0].count("True") == 5


def test_stdout_and_stderr_are_captured_and_never_reach_the_host(kind: str, capfd: pytest.CaptureFixture[str]) -> None:
    body = "import sys\nprint('to-out')\nprint('to-err', file=sys.stderr)\n1 + 1"
    result, root = run(kind, [code(body), code("submit(1)")])
    obs = observations(root)[0]
    assert "to-out\n2" in obs and "[stderr]\nto-err" in obs
    captured = capfd.readouterr()
    assert "to-out" not in captured.out + captured.err and "to-err" not in captured.out + captured.err


def test_long_output_is_bounded_keeping_head_and_tail(kind: str) -> None:
    body = "for i in range(200000):\n    print('line', i)"
    result, root = run(kind, [code(body), code("submit(1)")], max_output_chars=1000)
    executed = result.trajectory.of(CodeExecuted)[0]
    assert executed.stdout.startswith("line 0\n") and "line 199999" in executed.stdout
    assert "characters omitted" in executed.stdout and len(executed.stdout) < 3000
    assert len(observations(root)[0]) < 3000


def test_a_timeout_is_an_observation_and_variables_survive(kind: str) -> None:
    replies = [code("x = 41"), code("print('started')\nwhile True:\n    pass"), code("submit(x + 1)")]
    result, root = run(kind, replies, timeout=0.5)
    assert result.answer == 42
    obs = observations(root)[1]
    assert "did not finish within 0.5 seconds" in obs and "started" in obs
    executed = result.trajectory.of(CodeExecuted)[1]
    assert executed.timed_out and not executed.restarted


class SlowOnFirst(ScriptedLM):
    """Answers 'answer to <prompt>'; the prompt 'first' takes 1.5 s."""

    async def acomplete(self, messages: list[dict[str, str]], **params: Any) -> Any:
        if messages[-1]["content"] == "first":
            await asyncio.sleep(1.5)
        return self.complete(messages, **params)


def test_a_timed_out_sub_call_never_answers_a_later_step(kind: str) -> None:
    sub = SlowOnFirst(lambda m: "answer to " + m[-1]["content"])
    replies = [code("late = llm_query('first')"), code("now = llm_query('second')\nprint(now)"), code("submit(now)")]
    result, root = run(kind, replies, sub=sub, timeout=0.5, max_llm_calls=5)
    assert "did not finish" in observations(root)[0]
    assert "answer to second" in observations(root)[1]
    assert result.answer == "answer to second"


class SlowHost(EchoHost):
    async def llm_query(self, prompt: str, model: str | None = None) -> str:
        if prompt == "slow":
            await asyncio.sleep(2)
        return await super().llm_query(prompt, model)


async def test_snippets_with_the_same_turn_number_keep_working_after_a_timeout(kind: str) -> None:
    sandbox = create_sandbox(kind)
    try:
        await sandbox.start(SlowHost(asyncio.get_running_loop()))
        await sandbox.bind([])
        first = await sandbox.execute("llm_query('slow')", 0.5)
        second = await sandbox.execute("print(llm_query('fast'))", 5)
        assert first.timed_out and second.stdout == "FAST\n"
    finally:
        await sandbox.close()


# ---- restart, continue, interrupt ----------------------------------------------------------------------------------
async def test_restart_clears_variables_and_keeps_inputs(kind: str) -> None:
    from rlmnb._ground.config import RLMConfig
    from rlmnb.inputs import bind_inputs

    fields, _ = bind_inputs({"text": "kept"}, RLMConfig())
    sandbox = create_sandbox(kind, max_output_chars=1000)
    try:
        await sandbox.start(EchoHost(asyncio.get_running_loop()))
        await sandbox.bind(fields)
        await sandbox.execute("a = 1", 5)
        assert await sandbox.variables() == ["a"]
        await sandbox.restart()
        lost = await sandbox.execute("a", 5)
        kept = await sandbox.execute("print(inputs['text'], llm_query('x'))", 5)
        assert lost.error_type == "NameError"
        assert kept.stdout == "kept X\n"
        assert await sandbox.variables() == []
    finally:
        await sandbox.close()


def test_continue_keeps_variables_and_does_not_ship_the_same_input_again(kind: str) -> None:
    big = pd.DataFrame({"v": np.arange(100_000)})
    root = ScriptedLM([code("kept = int(inputs['t']['v'].sum())\nprint(kept)"), code("submit(kept)"),
                       code("print(kept, inputs['extra'], len(inputs['t']))"),
                       code("submit([kept, inputs['extra'], len(inputs['again'])])")])
    rlm = RLM(root, sandbox=kind)
    first = rlm.run("Sum it", t=big, keep_session=True)
    assert first.answer == int(big["v"].sum()) and first.session is not None
    sandbox = first.session.sandbox
    shipped = getattr(sandbox, "bytes_shipped", 0)
    pid = getattr(sandbox, "kernel_pid", None)
    try:
        second = rlm.run("Now more", continue_from=first, extra="new", again=big, keep_session=True)
        assert second.answer == [int(big["v"].sum()), "new", 100_000]
        assert second.session is not None and second.session.sandbox is sandbox
        assert any("New question" in m["content"] for m in root.requests[-1] if m["role"] == "user")
        if kind == "kernel":
            assert sandbox.kernel_pid == pid
            assert sandbox.bytes_shipped - shipped < 100  # only the short text; the frame was not written again
    finally:
        first.session.close()
    assert second.session.closed is False
    second.session.close()


def test_each_run_gets_a_namespace_no_earlier_run_touched(kind: str) -> None:
    rlm = RLM(ScriptedLM([code("leak = 'from run one'\nprint(1)"), code("submit(1)"),
                          code("print('leak' in dir())"), code("submit('leak' in globals())")]), sandbox=kind)
    assert rlm.run("one", text="a").answer == 1
    assert rlm.run("two", text="b").answer is False


def test_the_users_interrupt_stops_the_run_and_the_sandbox(kind: str) -> None:
    # The Ctrl-C comes once the step is running (it printed), whatever the machine's load (a fixed timer fired
    # during input binding on a loaded machine, before the run began).
    root = ScriptedLM([code("import time\nprint('running', flush=True)\nfor _ in range(400):\n    time.sleep(0.05)")]
                      * 3)
    timers: list[threading.Timer] = []

    def interrupt_once_running(event: Any) -> None:
        if event.kind == "code_output" and not timers:
            timers.append(threading.Timer(0.2, _thread.interrupt_main))
            timers[0].start()

    rlm = RLM(root, sandbox=kind, timeout=30, on_event=interrupt_once_running)
    try:
        result = rlm.run("q", text="abc")
    finally:
        for timer in timers:
            timer.join()
    assert len(timers) == 1
    assert result.status == "interrupted"
    assert result.trajectory.final() is not None
    pool.wait_idle(60)
    assert not [t for t in threading.enumerate() if t.name.startswith("rlmnb-") and t.is_alive()
                and t.name != SPAWNER_THREAD]  # the process's one kernel launcher outlives runs by design


def test_a_memory_limit_can_be_given_as_a_size_string(kind: str) -> None:
    result, _ = run(kind, first_step("submit(len(inputs['text']))"), memory_limit="2GB")
    assert result.answer == 16
    with pytest.raises(ConfigError, match="memory_limit"):
        RLM(ScriptedLM([]), sandbox=kind, memory_limit="lots")
