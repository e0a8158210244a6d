"""RULER from NVIDIA's generators (`ruler:<name>`): generation at 4k tokens offline, RULER's scoring, and
`rlmnb eval --task ruler:...` end to end against the fake server (a reader that finds the needle by regex).

Generation runs NVIDIA's own scripts in a child process (nvidia-long-context-eval, the `ruler` extra); the
tests that need it skip with the install command when it is absent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rlmnb._eval.tasks import get_task
from rlmnb._eval.tasks.base import expand_tasks
from rlmnb._eval.tasks.ruler import END, NAMES, START, split_prompt, string_match_all, string_match_part
from rlmnb._ground.errors import ConfigError


@pytest.fixture(scope="module")
def ruler_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    pytest.importorskip("long_context_eval", reason="pip install 'rlmnb[ruler]' for NVIDIA's RULER generators")
    folder = tmp_path_factory.mktemp("ruler")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RLMNB_RULER_DIR", str(folder))
        yield folder


def test_scores_are_rulers_string_match_all_and_part() -> None:
    refs = ["4015985", "8138881"]
    assert string_match_all(refs, "The numbers are 4015985 and 8138881.") == 1.0
    assert string_match_all(refs, ["4015985"]) == 0.5
    assert string_match_all(refs, {"answer": "8138881"}) == 0.5
    assert string_match_all(refs, "none") == 0.0
    assert string_match_part(["France", "france"], "It is in FRANCE") == 1.0
    assert string_match_part(["France"], "Italy") == 0.0
    assert string_match_part(["France"], None) == 0.0


def test_split_prompt_takes_the_last_marked_block_and_drops_the_answer_prefix() -> None:
    text = (f"Example: {START}a b a{END} Question: top words? Answer: The top words are: a\n"
            f"Below is a list.\n{START}x y x{END}\nQuestion: top words? Answer: The top words are:")
    question, context = split_prompt(text, " Answer: The top words are:")
    assert context == "x y x"
    assert START not in question and END not in question
    assert question.startswith("Example: a b a Question") and question.endswith("Question: top words?")
    assert "[the text is in the input `context`]" in question


def test_task_names_and_all() -> None:
    assert len(NAMES) == 13
    assert expand_tasks(["ruler:all"]) == [f"ruler:{n}" for n in NAMES]
    assert expand_tasks(["niah", "ruler:vt"]) == ["niah", "ruler:vt"]
    assert get_task("ruler:niah-single-1").name == "ruler:niah_single_1"
    with pytest.raises(ConfigError, match="unknown RULER task 'nope'"):
        get_task("ruler:nope")


def test_missing_generators_name_the_install_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import importlib.util

    from rlmnb._eval.tasks import ruler

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "long_context_eval" else real(name, *a))
    monkeypatch.setenv("RLMNB_RULER_DIR", str(tmp_path))
    ruler._block.cache_clear()
    with pytest.raises(ConfigError, match=re.escape("pip install 'rlmnb[ruler]'")):
        get_task("ruler:fwe").generate(4000, seed=7)


@pytest.mark.parametrize("name", ["niah_single_2", "vt", "cwe", "fwe", "qa_1", "qa_2"])
def test_generates_at_4k_offline_and_scores_its_own_answer(name: str, ruler_dir: Path) -> None:
    instance = get_task(f"ruler:{name}").generate(4000, seed=0, index=1)
    context = instance.inputs["context"]
    assert instance.task == f"ruler:{name}" and instance.index == 1
    assert 1_500 < instance.tokens <= 4000, instance.tokens
    assert instance.meta["ruler_length"] <= 4000
    assert START not in instance.question and END not in instance.question
    assert START not in context and END not in context
    assert "[the text is in the input `context`]" in instance.question
    assert isinstance(instance.answer, list) and instance.answer
    if name != "qa_2":  # HotpotQA's "yes"/"no" answers need not be in the documents
        assert all(a.lower() in context.lower() for a in instance.answer[:1]), instance.answer
    assert instance.score(instance.answer) == 1.0
    assert instance.score(" ".join(instance.answer)) == 1.0
    assert instance.score("I do not know") == 0.0
    if name == "niah_single_2":
        assert "splitter" in instance.meta
        assert "One of the special magic numbers for " in context and instance.answer[0] in context
    again = get_task(f"ruler:{name}").generate(4000, seed=0, index=1)
    assert again == instance  # the block is kept: the same instance every time
    assert list(ruler_dir.rglob(f"{name}-4000-42-10.jsonl"))


def test_the_same_sample_from_a_fresh_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sample i does not depend on the machine's cache: a new block generated elsewhere is identical."""
    pytest.importorskip("long_context_eval", reason="pip install 'rlmnb[ruler]'")
    from rlmnb._eval.tasks import ruler

    first = get_task("ruler:fwe").generate(4000, seed=3, index=2)
    ruler._block.cache_clear()
    monkeypatch.setenv("RLMNB_RULER_DIR", str(tmp_path / "elsewhere"))
    second = get_task("ruler:fwe").generate(4000, seed=3, index=2)
    assert first == second and first.inputs == second.inputs
    other = get_task("ruler:fwe").generate(4000, seed=3, index=3)
    assert other.inputs != first.inputs


def _needles(question: str, text: str) -> str:
    key = re.search(r"magic (?:number|numbers|value|values|uuid|uuids) for (.+?) mentioned", question)
    if not key:
        return "unknown"
    found = re.findall(re.escape(key.group(1)) + r" is: (\S+?)\.(?:\s|$)", text)
    return ", ".join(found) or "none"


class NeedleReader:
    """The fake server's model: direct prompts answered by regex; rlmnb's root writes that regex as code."""

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        system = " ".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
        last = str(messages[-1].get("content") or "")
        if "llm_query" not in system:
            return _needles(last, last)
        opening = next(str(m.get("content") or "") for m in messages if m.get("role") == "user")
        key = re.search(r"magic \w+ for (.+?) mentioned", opening)
        assert key is not None, "RULER's question reaches the root"
        return ("```python\nimport re\nfound = re.findall(" + repr(re.escape(key.group(1)) + r" is: (\S+?)\.(?:\s|$)")
                + ", inputs['context'])\nsubmit(', '.join(found))\n```")


def test_eval_runs_ruler_through_the_fake_server(fake_server_factory: Callable[..., Any], ruler_dir: Path,
                                                 tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rlmnb._cli import main

    server = fake_server_factory(responder=NeedleReader())
    code = main(["eval", "--task", "ruler:niah_single_2", "--sizes", "4k", "--methods", "rlm,direct",
                 "-m", "openai/ruler-root", "--api-base", server.url, "--api-key", "fake-key", "-n", "2",
                 "--out", str(tmp_path), "--sandbox", "local", "--context-window", "16000", "--quiet", "--no-plot"])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert sorted((r["method"], r["index"]) for r in rows) == [("direct", 0), ("direct", 1), ("rlm", 0), ("rlm", 1)]
    assert all(r["task"] == "ruler:niah_single_2" and r["score"] == 1.0 for r in rows), rows
    assert "ruler:niah_single_2" in out


def test_the_task_table_is_nvidias_synthetic_yaml() -> None:
    """The 13 tasks and their generator arguments are exactly those of RULER's own config."""
    pytest.importorskip("long_context_eval", reason="pip install 'rlmnb[ruler]'")
    import yaml

    from rlmnb._eval.tasks.ruler import TASKS, package_dir

    config = yaml.safe_load((package_dir() / "synthetic.yaml").read_text(encoding="utf-8"))
    assert {name: (c["task"], c["args"]) for name, c in config.items()} == TASKS


def test_the_offline_splitter_differs_from_trained_punkt_only_at_abbreviations() -> None:
    """What the module docstring says of nltk's untrained Punkt: it splits after "Mr.", "e.g.", "U.S."
    (which trained English Punkt keeps inside a sentence) and keeps initials and decimals whole."""
    nltk = pytest.importorskip("nltk")
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    assert nltk is not None
    text = "Mr. Smith went to Washington. He said e.g. this works. J. R. R. Tolkien wrote it. It cost $3.50 here."
    assert PunktSentenceTokenizer().tokenize(text) == [
        "Mr.", "Smith went to Washington.", "He said e.g.", "this works.", "J. R. R. Tolkien wrote it.",
        "It cost $3.50 here."]
