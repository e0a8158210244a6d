"""The dry run's low end is a lean run whatever the input size, and each end says what it assumes."""

from __future__ import annotations

import re

from rlmnb._engine.estimate import LEAN_SUB_CALLS, estimate_run
from rlmnb._ground.config import RLMConfig


def test_the_low_end_of_a_huge_input_assumes_a_few_sub_calls_not_the_budget() -> None:
    config = RLMConfig(max_iterations=20, max_llm_calls=50)
    est = estimate_run(first_prompt_tokens=3_000, data_tokens=200_000_000, config=config, model="openai/gpt-5-mini")
    assert est.low.sub_calls == LEAN_SUB_CALLS < est.high.sub_calls == 50
    assert est.low_usd is not None and est.high_usd is not None and est.low_usd < est.high_usd / 4
    low, high = est.lines()[1], est.lines()[2]
    assert re.match(r"  low \(a lean run\): assumes 3 root call\(s\) and 10 sub-call\(s\) of ~[\d,]+ tokens with "
                    r"~100-token replies; [\d,]+ in / [\d,]+ out tokens$", low), low
    assert re.match(r"  high \(the whole budget\): assumes 21 root call\(s\) and 50 sub-call\(s\) of ~[\d,]+ "
                    r"tokens with ~1,000-token replies;", high), high


def test_a_small_budget_keeps_the_low_end_below_the_high_one() -> None:
    est = estimate_run(first_prompt_tokens=1_000, data_tokens=1_000_000, config=RLMConfig(max_llm_calls=4),
                       model="openai/gpt-5-mini")
    assert est.low.sub_calls == 2 and est.high.sub_calls == 4
