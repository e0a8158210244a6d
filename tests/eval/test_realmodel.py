"""One root step against the real local model of ../shared/realmodel, when it is running (never in CI)."""

from __future__ import annotations

import urllib.request

import pytest

from rlmnb import RLM

URL = "http://127.0.0.1:8899/v1"


def _serving() -> bool:
    try:
        with urllib.request.urlopen(URL + "/models", timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


pytestmark = pytest.mark.skipif(not _serving(), reason="the real model server is not running (serve.sh start)")


def test_a_real_model_step_runs_and_is_recorded_honestly() -> None:
    from rlmnb._models.litellm import LiteLLM
    from rlmnb.events import CodeExecuted, ModelReply

    lm = LiteLLM("openai/local", api_base=URL, api_key="none", temperature=0, max_tokens=300,
                 context_window=16384, input_cost_per_token=0, output_cost_per_token=0)
    # the root's own step is what this checks, so no first reading (with one, the model may restate its answer)
    result = RLM(lm, lm, sandbox="local", max_iterations=2, cache=False, first_read="off").run(
        "How many characters long is the text?", text="abc " * 500)
    replies = result.trajectory.of(ModelReply)
    assert replies and all(r.finish_reason in ("stop", "length") for r in replies)
    for reply in replies:
        assert "```output" not in reply.text or "outputs_removed" in " ".join(reply.notes)
    assert result.trajectory.of(CodeExecuted) or any("cut" in r.notes for r in replies)
