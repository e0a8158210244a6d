"""The %%rlm option line: a repeated single-valued option is refused, and "did you mean" names only close options."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError

from rlmnb._notebook.magic import RLMMagics
from rlmnb._notebook.options import parse_line

MAGIC = RLMMagics.rlm


@pytest.mark.parametrize("line", ["-m openai/a -m openai/b", "-m openai/a --model openai/b",
                                  "--model=openai/a -m openai/b", "--max-iterations 3 --max-iterations 4",
                                  "--sandbox local -i x --sandbox kernel", "--resume 2 --resume 3"])
def test_a_repeated_single_valued_option_is_refused(line: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_line(MAGIC, line)
    assert len(str(caught.value).splitlines()) == 1


@pytest.mark.parametrize("line, expected", [
    ("-i a=x -i b=y", {"inputs": ["a=x", "b=y"]}),  # repeatable
    ("-f a=./x.md -f b=./y.md --quiet --quiet", {"files": ["a=./x.md", "b=./y.md"], "quiet": True}),
    ("-m openai/a -s openai/a", {"model": "openai/a", "sub_model": "openai/a"}),  # the same value, two options
    ("--verify pattern=-m --model openai/a", {"model": "openai/a"}),  # a value that looks like an option
    ("--resume --force", {"resume": "last", "force": True}),
])
def test_repeatable_options_flags_and_distinct_options_pass(line: str, expected: dict[str, object]) -> None:
    args = parse_line(MAGIC, line)
    assert {name: getattr(args, name) for name in expected} == expected


@pytest.mark.parametrize("typed, meant", [("--max-iter", "--max-iterations"), ("--modle", "--model"),
                                          ("--sandbx", "--sandbox"), ("--dryrun", "--dry-run")])
def test_a_close_typo_gets_the_option_it_meant(typed: str, meant: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_line(MAGIC, f"{typed} 3")
    assert f"did you mean {meant}?" in str(caught.value)


@pytest.mark.parametrize("typed", ["--bogus", "--zzz", "-q"])
def test_an_option_close_to_none_gets_no_suggestion(typed: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_line(MAGIC, typed)
    assert "did you mean" not in str(caught.value)
