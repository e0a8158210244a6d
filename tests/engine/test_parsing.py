from __future__ import annotations

import pytest

from rlmnb._engine.parsing import extract_code


def test_python_fence() -> None:
    got = extract_code("Let me look.\n```python\nprint(len(inputs['t']))\n```\nThen more.")
    assert got.layer == "fenced"
    assert got.code == "print(len(inputs['t']))"


@pytest.mark.parametrize("tag", ["py", "python3", "repl", "ipython", "Python"])
def test_other_python_tags(tag: str) -> None:
    got = extract_code(f"```{tag}\nx = 1\n```")
    assert got.code == "x = 1"


def test_all_blocks_run_in_order_as_one_snippet() -> None:
    got = extract_code("```python\na = 1\n```\nand\n```python\nprint(a)\n```")
    assert got.code == "a = 1\n\nprint(a)"
    assert got.blocks == 2


def test_bare_fence_only_when_it_parses_as_python() -> None:
    assert extract_code("```\nresult = sum(range(3))\n```").code == "result = sum(range(3))"
    assert extract_code("```\nThis is prose, not code at all!\n```").code is None


def test_other_languages_are_skipped() -> None:
    got = extract_code("```json\n{\"a\": 1}\n```\n```bash\nls -la\n```\n```python\nprint(2)\n```")
    assert got.code == "print(2)"


def test_console_prompts_are_stripped() -> None:
    assert extract_code("```python\n>>> x = 2\n>>> print(x)\n```").code == "x = 2\nprint(x)"


def test_indented_block_layer() -> None:
    reply = "I will count rows:\n\n    n = len(inputs['t'])\n    print(n)\n\nThat is all."
    got = extract_code(reply)
    assert got.layer == "indented"
    assert got.code == "n = len(inputs['t'])\nprint(n)"


def test_indented_prose_is_not_code() -> None:
    assert extract_code("Notes:\n    this is just an indented sentence here\n").code is None


def test_final_call_in_prose() -> None:
    got = extract_code('I am done. FINAL("the answer is (42)") as requested.')
    assert got.layer == "final"
    assert got.code == 'FINAL("the answer is (42)")'


def test_final_var_in_prose() -> None:
    assert extract_code("Submitting now: FINAL_VAR(result)").code == "FINAL_VAR(result)"


def test_fence_wins_over_final_in_prose() -> None:
    got = extract_code('FINAL("x")\n```python\nprint(1)\n```')
    assert got.layer == "fenced" and got.code == "print(1)"


def test_no_code() -> None:
    got = extract_code("I think the answer is probably 42, but let me reflect.")
    assert got.code is None and got.layer == "none"


def test_unbalanced_final_is_ignored() -> None:
    assert extract_code("FINAL(oops").code is None
