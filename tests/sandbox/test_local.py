"""The local sandbox on its own, driven through a minimal host (no models)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping
from typing import Any

import pytest
from sandbox_support import EchoHost

from rlmnb._sandbox.local import LocalSandbox


async def started(tools: Mapping[str, Any] | None = None, **kw: Any) -> tuple[LocalSandbox, EchoHost]:
    sb = LocalSandbox(**kw)
    host = EchoHost(asyncio.get_running_loop(), tools)
    await sb.start(host)
    return sb, host


async def test_stdout_is_captured_and_never_leaks(capsys: pytest.CaptureFixture[str]) -> None:
    sb, _ = await started()
    res = await sb.execute("print('hello')\nimport sys\nprint('warn', file=sys.stderr)", 5)
    await sb.close()
    assert res.stdout == "hello\n" and res.stderr == "warn\n"
    assert "hello" not in capsys.readouterr().out


async def test_namespace_persists_and_is_not_the_callers() -> None:
    sb, _ = await started()
    await sb.execute("x = 41", 5)
    res = await sb.execute("x + 1", 5)
    assert res.stdout == "42\n"  # the trailing expression is echoed like a REPL
    assert "x" not in globals()
    assert await sb.variables() == ["x"]
    await sb.close()


async def test_llm_query_goes_through_the_host() -> None:
    sb, host = await started()
    res = await sb.execute("r = llm_query('abc')\nrs = llm_query_batched(['x', 'y'])\nprint(r, rs)", 5)
    await sb.close()
    assert res.stdout == "ABC ['X', 'Y']\n"
    assert host.prompts == ["abc", "x", "y"]


async def test_bad_prompt_types_are_clear_errors() -> None:
    sb, _ = await started()
    res = await sb.execute("llm_query(['a'])", 5)
    assert res.error_type == "TypeError" and "str prompt" in (res.error or "")
    res = await sb.execute("llm_query_batched('abc')", 5)
    assert res.error_type == "TypeError"
    await sb.close()


async def test_traceback_is_trimmed_to_snippet_frames() -> None:
    sb, _ = await started()
    res = await sb.execute("import json\ndef f():\n    return json.loads('{bad')\nf()", 5)
    await sb.close()
    assert res.error_type == "JSONDecodeError"
    assert "line 3, in f" in (res.error or "") and "return json.loads" in (res.error or "")
    assert "json/decoder.py" not in (res.error or "")


async def test_submit_is_terminal_and_cannot_be_swallowed() -> None:
    sb, _ = await started()
    res = await sb.execute("try:\n    submit({'a': 1})\nexcept Exception:\n    print('swallowed')\nprint('after')", 5)
    await sb.close()
    assert res.submitted and res.answer == {"a": 1}
    assert "swallowed" not in res.stdout and "after" not in res.stdout


async def test_final_var_and_final() -> None:
    sb, _ = await started()
    await sb.execute("result = [1, 2]", 5)
    res = await sb.execute("FINAL_VAR('result')", 5)
    assert res.submitted and res.answer == [1, 2]
    res = await sb.execute("FINAL_VAR('nope')", 5)
    assert not res.submitted and "no variable of that name" in (res.error or "") and "result" in (res.error or "")
    res = await sb.execute("FINAL('done')", 5)
    assert res.answer == "done"
    await sb.close()


async def test_submit_while_handling_an_exception_is_flagged() -> None:
    sb, _ = await started()
    res = await sb.execute("try:\n    1/0\nexcept ZeroDivisionError:\n    submit(0)", 5)
    await sb.close()
    assert res.submitted and res.submit_during_exception == "ZeroDivisionError"


async def test_unjsonable_submit_is_flagged() -> None:
    sb, _ = await started()
    res = await sb.execute("submit(object())", 5)
    await sb.close()
    assert res.submitted and res.submit_error and "object" in res.submit_error


async def test_numpy_values_become_json() -> None:
    sb, _ = await started()
    res = await sb.execute("import numpy as np\nsubmit({'n': np.int64(3), 'a': np.arange(3)})", 5)
    await sb.close()
    assert res.answer == {"n": 3, "a": [0, 1, 2]}


@pytest.mark.parametrize("name", ["input", "breakpoint", "exit", "quit"])
async def test_interactive_builtins_are_disabled(name: str) -> None:
    sb, _ = await started()
    res = await sb.execute(f"{name}()", 5)
    await sb.close()
    assert res.error_type == "RuntimeError" and "not available in the sandbox" in (res.error or "")


async def test_timeout_stops_a_busy_loop() -> None:
    sb, _ = await started()
    res = await sb.execute("x = 0\nwhile True:\n    x += 1", 0.3)
    assert res.timed_out
    res2 = await sb.execute("print('still alive', x > 0)", 5)
    assert res2.stdout == "still alive True\n"
    assert sb.stray_threads == 0
    await sb.close()


async def test_timeout_cannot_be_swallowed_by_except() -> None:
    sb, _ = await started()
    res = await sb.execute("while True:\n    try:\n        pass\n    except Exception:\n        pass", 0.3)
    await sb.close()
    assert res.timed_out


async def test_huge_output_is_bounded() -> None:
    sb, _ = await started(max_output_chars=1000)
    res = await sb.execute("for i in range(200000):\n    print('line', i)", 300)  # the bound, not the speed
    await sb.close()
    assert len(res.stdout) < 3000
    assert res.stdout.startswith("line 0\n") and "line 199999" in res.stdout
    assert "characters omitted" in res.stdout


async def test_user_tools_are_callable() -> None:
    def lookup(key: str) -> str:
        return f"value-of-{key}"

    sb, _ = await started(tools={"lookup": lookup})
    res = await sb.execute("print(lookup('k'))", 5)
    await sb.close()
    assert res.stdout == "value-of-k\n"


async def test_show_vars() -> None:
    sb, _ = await started()
    res = await sb.execute("rows = [1, 2, 3]\nSHOW_VARS()", 5)
    await sb.close()
    assert "rows: list len=3" in res.stdout
    assert "llm_query" not in res.stdout


async def test_restart_clears_variables() -> None:
    sb, _ = await started()
    await sb.execute("a = 1", 5)
    await sb.restart()
    res = await sb.execute("a", 5)
    await sb.close()
    assert res.error_type == "NameError"


async def test_stdout_restored_after_close() -> None:
    before = sys.stdout
    sb, _ = await started()
    await sb.close()
    assert sys.stdout is before
