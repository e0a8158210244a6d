"""The dry-run cost range and model prices (no model call, litellm not imported)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rlmnb._engine.estimate import CostEstimate, estimate_run, price_of
from rlmnb._ground.config import RLMConfig
from rlmnb.testing import ScriptedLM


class PricedLM:
    name = "house-model"
    input_cost_per_token = 1e-6
    output_cost_per_token = 4e-6
    context_window = 20_000


def test_prices_come_from_the_object_then_the_bundled_table() -> None:
    assert price_of(PricedLM()).input_per_token == 1e-6  # type: ignore[union-attr]
    scripted = price_of(ScriptedLM([]))
    assert scripted is not None and scripted.cost(1_000_000, 1_000_000) == 0.0
    gpt = price_of("openai/gpt-5")
    assert gpt is not None and gpt.input_per_token > 0 and gpt.output_per_token > gpt.input_per_token
    assert gpt.source == "litellm's price table"
    assert price_of("nobody/never-heard-of-it") is None


def test_price_lookup_does_not_import_litellm() -> None:
    code = "import sys\nfrom rlmnb._engine.estimate import price_of\nprice_of('openai/gpt-5')\nprint('litellm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"


def test_range_brackets_a_lean_run_and_the_whole_budget() -> None:
    config = RLMConfig(max_iterations=10, max_llm_calls=40)
    est = estimate_run(first_prompt_tokens=2_000, data_tokens=100_000, config=config, model=PricedLM())
    assert isinstance(est, CostEstimate)
    assert (est.low.root_calls, est.high.root_calls) == (3, 11)  # lean turns; every turn plus the fallback
    assert est.low.sub_calls == 10 and est.high.sub_calls == 40  # window 20k: chunks of 10k tokens
    assert est.low.sub_input >= 100_000 and est.high.sub_input == 40 * (10_000 + 100)
    assert est.low_usd is not None and est.high_usd is not None and 0 < est.low_usd < est.high_usd
    expected_low = (est.low.root_input + est.low.sub_input) * 1e-6 + (est.low.root_output + est.low.sub_output) * 4e-6
    assert est.low_usd == pytest.approx(expected_low)
    assert est.cost_text().startswith("$") and " – $" in est.cost_text()
    assert any("house-model" in line for line in est.lines())


def test_caps_bound_the_high_end() -> None:
    capped = estimate_run(first_prompt_tokens=2_000, data_tokens=10_000_000,
                          config=RLMConfig(max_cost=0.05, max_tokens=300_000), model="openai/gpt-5")
    assert capped.high_usd == 0.05 and "max_cost" in capped.high.capped and "max_tokens" in capped.high.capped
    assert capped.high.tokens <= 300_000


def test_unknown_price_is_unknown_not_zero() -> None:
    est = estimate_run(first_prompt_tokens=1_000, data_tokens=0, config=RLMConfig(), model="nobody/x")
    assert est.low_usd is None and est.cost_text().startswith("unknown")
    assert est.low.sub_calls == 0 and "no price known" in est.lines()[-1]
