"""`%rlm models` says where each model's key comes from: the api_key= argument, an environment variable, or
none needed for a server on this machine; a model with its own key never reads "OPENAI_API_KEY is NOT set"."""

from __future__ import annotations

import re

import pytest
from IPython.core.interactiveshell import InteractiveShell
from test_magic import magics, shell  # noqa: F401  (shell is a fixture)

from rlmnb import LiteLLM
from rlmnb._notebook.settings import key_source
from rlmnb.testing import ScriptedLM
from rlmnb.testing.fake_server import FakeServer


def test_key_source_of_each_kind_of_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert key_source(LiteLLM("openai/x", api_base="https://proxy.example/v1", api_key="sk-1")) == \
        "key from the api_key= argument at https://proxy.example/v1"
    assert key_source(LiteLLM("ollama_chat/qwen3")) == "no key needed (server on this machine)"
    assert key_source(LiteLLM("hosted_vllm/q", api_base="http://127.0.0.1:8000/v1")) == \
        "no key needed (server on this machine at http://127.0.0.1:8000/v1)"
    assert key_source(LiteLLM("openai/local", api_base="http://127.0.0.1:8080/v1")) == \
        "OPENAI_API_KEY is NOT set: http://127.0.0.1:8080/v1 is on this machine, pass api_key='none' if it needs none"
    assert key_source(LiteLLM("openai/x", api_base="https://proxy.example/v1")) == \
        "OPENAI_API_KEY is NOT set (for https://proxy.example/v1)"
    assert key_source("openai/gpt-5") == "OPENAI_API_KEY is NOT set"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    assert key_source(LiteLLM("openai/gpt-5")) == "OPENAI_API_KEY is set"
    assert key_source(ScriptedLM(["x"])) == "no key needed"


def test_models_with_their_own_key_and_base_say_so_before_and_after_a_run(
        shell: InteractiveShell, capsys: pytest.CaptureFixture[str],  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    script = {"root": ["```python\nprint(len(inputs['text']))\n```", "```python\nsubmit('fine')\n```"]}
    with FakeServer(script=script).start() as server:
        shell.user_ns["proxied"] = LiteLLM("openai/root", api_base=server.url, api_key="sk-own-key")
        shell.user_ns["local"] = LiteLLM("hosted_vllm/root", api_base=server.url)
        shell.user_ns["text"] = "some text"
        shell.run_line_magic("config", "RLMMagics.model = 'proxied'")
        shell.run_line_magic("config", "RLMMagics.sub_model = 'local'")
        shell.run_line_magic("rlm", "models")
        before = capsys.readouterr().out
        assert shell.run_cell_magic("rlm", "-i text --quiet", "What is it?") == "fine"
    assert re.search(rf"root +openai/root \(LiteLLM object\) +from %config +key from the api_key= argument at "
                     rf"{re.escape(server.url)}", before), before
    assert re.search(r"sub +hosted_vllm/root \(LiteLLM object\) +from %config +no key needed \(server on this machine",
                     before), before
    shell.run_line_magic("rlm", "models")
    after = capsys.readouterr().out
    assert re.search(r"root \(last run\) +openai/root +from the last run +key from the api_key= argument", after)
    assert re.search(r"sub \(last run\) +hosted_vllm/root +from the last run +no key needed", after), after
    assert "NOT set" not in before + after and "sk-own-key" not in before + after
    assert magics(shell).last_models[0] is shell.user_ns["proxied"]


def test_out_name_holds_a_failed_run_too(shell: InteractiveShell) -> None:  # noqa: F811
    from rlmnb._notebook.magic import RunFailed

    shell.user_ns["root"] = ScriptedLM(["```python\nprint(1)\n```"], name="root")  # the script runs out: error
    shell.user_ns["text"] = "t"
    with pytest.raises(RunFailed, match=r"The partial result is in _rlm and broken\.$"):
        shell.run_cell_magic("rlm", "-m root -i text -o broken --quiet", "q")
    assert shell.user_ns["broken"] is shell.user_ns["_rlm"] and shell.user_ns["broken"].status == "error"


@pytest.mark.parametrize("line, hint", [
    ("--max-iteration 5", "--max-iteration: did you mean --max-iterations?"),
    ("--dryrun", "--dryrun: did you mean --dry-run?"),
    ("--max-iter 3", "--max-iter: did you mean --max-iterations?"),
    ("--qiuet --sandbx local", "--qiuet: did you mean --quiet?; --sandbx: did you mean --sandbox?"),
])
def test_a_typo_in_an_option_gets_did_you_mean(shell: InteractiveShell, line: str, hint: str) -> None:  # noqa: F811
    from IPython.core.error import UsageError

    shell.user_ns["text"] = "t"
    with pytest.raises(UsageError) as err:
        shell.run_cell_magic("rlm", f"-m root -i text {line}", "q")
    message = str(err.value)
    assert "unrecognized arguments:" in message and hint in message and message.endswith("(see %%rlm? for the options)")


def test_an_unknown_option_far_from_any_gets_no_guess(shell: InteractiveShell) -> None:  # noqa: F811
    from IPython.core.error import UsageError

    with pytest.raises(UsageError) as err:
        shell.run_cell_magic("rlm", "-m root --zzzzzzzz", "q")
    assert "did you mean" not in str(err.value)


def test_a_dry_run_shows_a_placeholder_at_once_then_clears_it(shell: InteractiveShell) -> None:  # noqa: F811
    shell.user_ns["root"] = ScriptedLM(["x"], name="root-model")
    shell.user_ns["text"] = "t"
    published: list[dict[str, object]] = shell.published  # type: ignore[attr-defined]
    seen_during: list[int] = []
    real = magics(shell)._dry_run

    def spy(*args: object) -> object:
        seen_during.append(len(published))  # what was on screen while the report was being built
        return real(*args)  # type: ignore[arg-type]

    magics(shell)._dry_run = spy  # type: ignore[method-assign]
    cell_value = shell.run_cell_magic("rlm", "-m root -i text --dry-run", "q")
    assert seen_during == [1] and "Dry run: building the first root request for root-model" in \
        str(published[0]["data"])
    assert published[1]["data"] == {"text/plain": "", "text/html": ""} and published[1].get("update") is True
    assert type(cell_value).__name__ == "DryRunReport"


def test_the_live_header_names_the_models_before_the_first_event() -> None:
    from rlmnb.views import RunTree
    from rlmnb.views._html import header_html

    tree = RunTree()
    tree.expected_models = ("openai/gpt-5-mini", "openai/gpt-5-nano")
    head = header_html(tree.run_view())
    assert "openai/gpt-5-mini" in head and "openai/gpt-5-nano" in head and "?" not in head


def test_the_widget_placeholder_shows_the_models_at_once(shell: InteractiveShell) -> None:  # noqa: F811
    shell.user_ns["root"] = ScriptedLM(["```python\nprint(1)\n```", "```python\nsubmit('ok')\n```"],
                                       name="root-model")
    shell.user_ns["sub"] = ScriptedLM(["x"], name="sub-model")
    shell.user_ns["text"] = "t"
    assert shell.run_cell_magic("rlm", "-m root -s sub -i text", "q") == "ok"
    first = shell.published[0]["data"]["text/html"]  # type: ignore[attr-defined]
    assert "starting…" in first and "root-model" in first and "sub-model" in first and "?" not in first
