"""A Ctrl-C at any moment of a run ends it as "interrupted" (before it begins, it raises); a subscriber that
raises is reported (issue 23).

SIGINT is delivered deterministically: a subscriber sends it to this process when a given event is
emitted (in the run's thread), and the waiting thread receives it as a KeyboardInterrupt.
"""

from __future__ import annotations

import logging
import os
import signal
from typing import Any

import pytest

from rlmnb import RLM
from rlmnb.events import Event
from rlmnb.testing import ScriptedLM

SCRIPT = ["```python\nparts = llm_query_batched(['a', 'b', 'c'])\nprint(parts)\n```",
          "```python\nsubmit(''.join(parts))\n```"]


def rlm(on_event: Any) -> RLM:
    return RLM(ScriptedLM(SCRIPT, name="root"), ScriptedLM(lambda m: str(m[-1]["content"]).upper(), name="sub"),
               sandbox="local", on_event=on_event)


@pytest.mark.parametrize("kind", ["run_started", "model_reply", "sub_call_finished", "code_executed", "submitted",
                                  "run_finished"])
def test_a_ctrl_c_at_any_event_ends_the_run_interrupted(kind: str) -> None:
    sent: list[str] = []

    def interrupt(event: Event) -> None:
        if event.kind == kind and not sent:
            sent.append(kind)
            os.kill(os.getpid(), signal.SIGINT)

    result = rlm(interrupt).run("Join the parts", x=1)
    assert sent == [kind]
    assert result.status == "interrupted", (result.status, result.reason)
    if kind == "run_finished":  # it came as the run ended: the answer it had is kept
        assert result.answer == "ABC" and "its answer is kept" in result.reason


def test_a_subscriber_that_raises_is_reported_once_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str] = []

    def broken_view(event: Event) -> None:
        seen.append(event.kind)
        if event.kind == "turn_started":
            raise ValueError("the view broke")

    with caplog.at_level(logging.ERROR, logger="rlmnb"):
        result = rlm(broken_view).run("Join the parts", x=1)
    assert result.status == "submitted" and result.answer == "ABC"  # the run went on
    assert len(result.subscriber_errors) == 1
    assert "broken_view at a turn_started event" in result.subscriber_errors[0]
    assert "Traceback" in result.subscriber_errors[0] and "ValueError: the view broke" in result.subscriber_errors[0]
    reports = [r for r in caplog.records if "broken_view" in r.getMessage()]
    assert len(reports) == 1 and "ValueError: the view broke" in reports[0].getMessage()
    assert seen.count("turn_started") == 1  # dropped after its error


def test_a_ctrl_c_while_the_inputs_are_bound_raises_before_anything_is_spent() -> None:
    root = ScriptedLM(SCRIPT, name="root")

    class SlowToDescribe(list):  # type: ignore[type-arg]
        """A list input whose binding is where the Ctrl-C lands (as a large folder's description would be)."""

        def __len__(self) -> int:
            os.kill(os.getpid(), signal.SIGINT)
            return super().__len__()

    with pytest.raises(KeyboardInterrupt):
        RLM(root, sandbox="local").run("Join the parts", rows=SlowToDescribe([1, 2, 3]))
    assert root.remaining == len(SCRIPT)  # no model call was made
