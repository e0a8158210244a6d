"""The turn loop of one run: `run_turns(ctx) -> Outcome`, calling `turn.run_turn` until the run ends.

When the turns run out (or a policy ends them) without an accepted submission, the policies say how the run
ends (`final_answer`: one last root call for the answer from the outputs); with none that does, the run ends
"budget_exhausted" without an answer. Also here: the prompts a run opens with (`system_prompt`, `first_prompt`). The loop renders nothing and owns no resources: `RunContext` brings the models,
sandbox, budget and event bus; runs.execute_run starts and closes them.
"""

from __future__ import annotations

from typing import Any

from rlmnb._engine.context import Outcome, RunContext
from rlmnb._engine.policies import EndTurns
from rlmnb._engine.turn import run_turn
from rlmnb._ground.config import RLMConfig
from rlmnb._ground.prompts import load, render
from rlmnb._guards.schema import AnswerSchema

__all__ = ["end_of_turns", "first_prompt", "run_turns", "system_prompt"]


def system_prompt(config: RLMConfig, sub_window: int | None, tools: dict[str, Any], example: str = "data") -> str:
    """The system rules; `example` names the input of the example first step (small models copy it)."""
    tool_lines = ""
    if tools:
        described = []
        for name, fn in tools.items():
            doc = (getattr(fn, "__doc__", None) or "").strip().splitlines()
            described.append(f"\n- `{name}(...)`: {doc[0] if doc else 'a tool provided by the user.'}")
        tool_lines = "".join(described)
    reads = (render("sub_window", tokens=f"{sub_window:,}", chars=f"{sub_window * 3:,}") if sub_window
             else load("sub_window_unknown"))
    rules = render("system", sub_reads=reads, example=example, max_llm_calls=config.max_llm_calls,
                   max_iterations=config.max_iterations, tools=tool_lines)
    if config.instructions:
        return config.instructions if config.replace_instructions else rules + "\n\n" + config.instructions
    return rules


def first_prompt(question: str, summary_text: str, config: RLMConfig, schema: AnswerSchema | None,
                 reading: str | None = None) -> str:
    """The question with its InputsSummary, limits and reach; with a first reading (`first_read`), its answers
    after the summary and a first step that checks them."""
    extra = []
    if config.max_tokens:
        extra.append(f"{config.max_tokens:,} tokens")
    if config.max_cost:
        extra.append(f"${config.max_cost:g}")
    if config.max_time:
        extra.append(f"{config.max_time:g} s")
    text = render("first_user", question=question.strip(), summary=summary_text,
                  reading=f"\n{reading}\n" if reading else "",
                  max_iterations=config.max_iterations, max_llm_calls=config.max_llm_calls,
                  extra_limits="".join(", " + e for e in extra),
                  start=load("first_read_start") if reading else "Start by exploring the inputs with code.")
    if config.sandbox == "kernel" and config.confinement != "off" and (config.allow_paths or config.allow_network):
        reach = [*(f"files under {p}" for p in config.allow_paths), *(f"TCP {n}" for n in config.allow_network)]
        text += render("reach", reach=", ".join(reach))
    if schema is not None:
        text += render("schema", schema=schema.json_schema_text())
    return text


async def run_turns(ctx: RunContext) -> Outcome:
    """Run turns until one ends the run, then let the policies end it if the turns ran out.

    Returns:
        How the run ended: "submitted", "fallback" or "budget_exhausted".

    Raises:
        ModelError, SandboxError: terminal trouble.
    """
    while ctx.turn < ctx.config.max_iterations:
        outcome = await run_turn(ctx)
        if isinstance(outcome, EndTurns):
            return await end_of_turns(ctx, outcome)
        if outcome is not None:
            return outcome
    return await end_of_turns(ctx)


async def end_of_turns(ctx: RunContext, stall: EndTurns | None = None) -> Outcome:
    """The outcome of a run whose turns ran out or were ended (`stall`) without an accepted answer."""
    outcome: Outcome | None = await ctx.policies.on_turns_end(ctx, stall)
    if outcome is not None:
        return outcome
    if stall is not None:
        return Outcome("budget_exhausted", None, f"no submit(): the reply at turn {stall.turn} repeated turn "
                       f"{stall.earlier}'s, and no policy gives a final answer")
    return Outcome("budget_exhausted", None, f"no submit() within {ctx.config.max_iterations} turns, and no policy "
                   "gives a final answer")
