"""Wording a newcomer reads: the budget refusal of a batch larger than the whole budget, the trace's filter
heading, the timeline legend of a finished run, and the demo's one time figure."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sandbox_support import code

from rlmnb import RLM
from rlmnb._cli import main
from rlmnb._engine.budget import Budget
from rlmnb._ground.config import RLMConfig
from rlmnb._ground.errors import BudgetExhausted
from rlmnb.testing import ScriptedLM
from rlmnb.views._timeline import LEGEND


def test_a_batch_larger_than_the_whole_budget_is_not_called_exhausted() -> None:
    budget = Budget(RLMConfig(max_llm_calls=50))
    with pytest.raises(BudgetExhausted) as err:
        budget.reserve("r", calls=240)
    assert str(err.value) == ("A batch of 240 sub-calls is larger than the whole sub-call budget (50 calls, none "
                              "spent yet); nothing was sent. Send at most 50 prompts at once, packing several items "
                              "into each.")
    budget.reserve("r", calls=38)
    with pytest.raises(BudgetExhausted, match=r"^Sub-call budget exhausted: 12 of 50 calls left, not enough for a "
                                              r"batch of 240; nothing was sent\. Send at most 12 prompts at once"):
        budget.reserve("r", calls=240)
    budget.reserve("r", calls=12)
    with pytest.raises(BudgetExhausted, match=r"^Sub-call budget exhausted: all 50 calls are spent"):
        budget.reserve("r", calls=1)


def test_the_legend_of_a_finished_run_says_provider_time_not_running() -> None:
    labels = dict(LEGEND)
    assert labels["ok"] == "sub-call (provider time)" and "running" not in " ".join(labels.values())


def test_the_filter_heading_has_no_nested_parentheses() -> None:
    from rlmnb._notebook.widget import RunWidget

    root = ScriptedLM([code("r = llm_query_batched([f'q{i}' for i in range(30)])"), code("submit(len(r))")])
    widget = RunWidget(interval=0.05)
    RLM(root, ScriptedLM(lambda m: "x", name="sub"), sandbox="local", on_event=widget.on_event).run("q", text="t")
    widget.finish()
    trace = widget.trace
    trace.keep.value = "error"  # observed: the list redraws
    status = re.search(r'rlmnb-search-status[^>]*>([^<]*)<', trace.results.value)
    assert status is not None and "((" not in status.group(1) and "))" not in status.group(1)
    assert status.group(1) == "0 sub-calls · errors", status.group(1)


def test_the_demo_gives_one_time_figure_in_the_views_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--size", "20000", "--sandbox", "local", "--html", str(tmp_path / "d.html")]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.match(r"The answer is correct; the run took \d+(\.\d)? (ms|s) \(\d+(\.\d)? (ms|s) with the sandbox's "
                    r"set-up\)\. HTML view written to ", last), last


def test_live_controls_are_disabled_with_the_reason_until_the_run_ends() -> None:
    from rlmnb._notebook.trace_panel import WAIT_REASON
    from rlmnb._notebook.widget import RunWidget

    root = ScriptedLM([code("r = llm_query_batched(['a', 'b'])"), code("submit(len(r))")])
    widget = RunWidget(interval=0.05)
    seen: list[tuple[bool, str]] = []

    def watch(event: object) -> None:
        widget.on_event(event)  # type: ignore[arg-type]
        if getattr(event, "kind", "") == "sub_call_finished":
            widget.push()
            trace = widget.trace
            seen.append((all(c.disabled for c in (trace.search, trace.sort, trace.keep, trace.timeline)),
                         trace.scope.value))

    RLM(root, ScriptedLM(lambda m: "x", name="sub"), sandbox="local", on_event=watch).run("q", text="t")
    assert seen and all(disabled for disabled, _ in seen) and WAIT_REASON in seen[0][1]
    assert widget.trace.search.tooltip == WAIT_REASON
    widget.finish()
    trace = widget.trace
    assert not any(c.disabled for c in (trace.search, trace.sort, trace.keep, trace.timeline))
    assert WAIT_REASON not in trace.scope.value
