"""Model names without a provider: the suggestion, the refusal, and that neither imports litellm."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rlmnb._ground.errors import ConfigError
from rlmnb._models.litellm import LiteLLM
from rlmnb._models.names import provider_hint
from rlmnb._models.resolve import resolve_model


@pytest.mark.parametrize("name, hint", [
    ("gpt-4o", "openai/gpt-4o"), ("o3-mini", "openai/o3-mini"), ("claude-sonnet-4", "anthropic/claude-sonnet-4"),
    ("gemini-2.5-pro", "gemini/gemini-2.5-pro"), ("mistral-large-latest", "mistral/mistral-large-latest"),
    ("command-r", "cohere/command-r"), ("llama3.1", "ollama/llama3.1"),
])
def test_well_known_prefixes_get_their_provider(name: str, hint: str) -> None:
    assert provider_hint(name) == hint


def test_names_with_a_provider_or_unknown_get_no_hint() -> None:
    assert provider_hint("openai/gpt-4o") is None
    assert provider_hint("zzz-not-a-model") is None


def test_litellms_model_list_names_what_the_table_does_not() -> None:
    pytest.importorskip("litellm")
    assert provider_hint("text-embedding-3-small") == "openai/text-embedding-3-small"


@pytest.mark.parametrize("name", ["gpt-4o", "claude-sonnet-4"])
def test_a_bare_name_is_refused_with_the_provider_form(name: str) -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_model(name)
    assert provider_hint(name) in str(caught.value)
    assert "needs api_base" not in str(caught.value)


def test_a_bare_name_with_an_api_base_is_the_servers_name() -> None:
    lm = LiteLLM("qwen2.5-coder", api_base="http://127.0.0.1:8080/v1")
    assert lm.name == "qwen2.5-coder" and lm.transport == "direct"


def test_the_refusal_imports_no_litellm() -> None:
    code = ("import sys\nfrom rlmnb._models.resolve import resolve_model\n"
            "try:\n    resolve_model('gpt-4o')\nexcept ValueError as exc:\n    print(type(exc).__name__)\n"
            "print('litellm' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["ConfigError", "False"], proc.stderr
