"""Policy `repeat_breaker`: a step that would repeat an earlier one is not run; the model is asked for another.

Looks at: the reply's code against the run's steps (`Repeats.ran`: code that ran cleanly, or failed the same way
twice, with no name it reads bound or changed since), or its prose against earlier prose (`Repeats.said_before`,
longer than `evidence.RESTATE_CHARS`). May: ask again without running it, in a request showing none of the model's
own replies (`reask_request`), at a higher temperature where the model was given a low one (seeded where the
provider takes a seed, so a rerun samples the same); up to `RLMConfig.repeat_asks` times a run, after which the
next repeat ends the turns (the final answer follows). When a repeated step still runs (same code, same output),
a note says it changed nothing and points at the latest different output. Why for any model: at temperature 0 the
same request gives the same reply, and a model that copies its own last reply loops until the turns run out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rlmnb._engine.evidence import RESTATE_CHARS, last_lines, latest_other, steps_of
from rlmnb._engine.policies.base import AskAgain, EndTurns, Policy
from rlmnb._engine.replies import without_code
from rlmnb._ground.prompts import load, render

if TYPE_CHECKING:
    from rlmnb._engine.context import RunContext
    from rlmnb._engine.replies import Step
    from rlmnb._models.base import Message
    from rlmnb._sandbox.base import ExecResult

__all__ = ["REASK_TEMPERATURE", "RepeatBreaker", "reask_request"]

REASK_TEMPERATURE = 0.7
"""Temperature of the re-ask after a repeated step, for a root model built with a lower one: at 0 the same
request prefix gives the same reply."""


class RepeatBreaker(Policy):
    name = "repeat_breaker"

    async def on_reply(self, ctx: RunContext, step: Step, request: list[Message]) -> AskAgain | EndTurns | None:
        earlier = repeated(ctx, step)
        if earlier is None:
            return None
        if ctx.repeats.asked >= ctx.config.repeat_asks:
            self.acted(ctx, "end_turns", f"the reply repeated turn {earlier} after {ctx.repeats.asked} asks")
            return EndTurns(ctx.turn, earlier)
        ctx.repeats.asked += 1
        if step.code is not None:
            failed = ctx.repeats.failed(step.code)
            ask = render("repeat_error_ask" if failed else "repeat_ask", turn=earlier)
            retry = reask_request(request, [step.code, *ctx.repeats.ran_codes()], ask)
        else:  # the same long prose again
            ask = render("repeat_prose_ask", turn=earlier)
            retry = reask_request(request, ctx.repeats.ran_codes(), ask)
        self.acted(ctx, "ask_again", f"the reply repeated turn {earlier}")
        return AskAgain(retry, ask, await reask_sampling(ctx))

    def on_output(self, ctx: RunContext, result: ExecResult, code: str, *, going_on: bool) -> list[str]:
        if ctx.stalled is None:
            return []
        step = latest_other(steps_of(ctx.bus.trajectory, ctx.scope.run_id), ctx.stalled)
        pointer = render("repeated_latest", turn=step.turn, lines="\n".join(last_lines(step.text))) if step else ""
        self.acted(ctx, "note", f"the step repeated turn {ctx.stalled} and changed nothing")
        return ["[note] " + render("repeated", turn=ctx.stalled, latest=pointer)]


def repeated(ctx: RunContext, step: Step) -> int | None:
    """The earlier turn this reply repeats (its code, or its long prose said again word for word), or None."""
    if step.empty:
        return None
    if step.code is not None:
        return ctx.repeats.ran(step.code)
    if len(" ".join(step.kept.split())) <= RESTATE_CHARS:
        return None
    return ctx.repeats.said_before(step.kept)


def reask_request(messages: list[Message], codes: list[str], ask: str) -> list[Message]:
    """The re-ask's request: the system prompt with the code of every step that already ran left out, then one user
    message holding the opening, every output so far and `ask`; none of the model's own replies (a model that
    copies its earlier replies sends them again when they are in view; the outputs carry what they found)."""
    placeholder = load("repeat_left_out")
    system: list[Message] = []
    said: list[str] = []
    for message in messages:
        content = message.get("content")
        if message.get("role") == "system":
            if isinstance(content, str):
                for code in codes:
                    content = without_code(content, code, placeholder)
            system.append({**message, "content": content})
        elif message.get("role") == "user":
            if not isinstance(content, str):  # images or parts: the request keeps its own shape
                return [*system, *(m for m in messages if m.get("role") != "assistant" and m.get("role") != "system"),
                        {"role": "user", "content": ask}]
            said.append(content)
    return [*system, {"role": "user", "content": "\n\n".join([*said, ask])}]


async def reask_sampling(ctx: RunContext) -> dict[str, Any]:
    """Sampling for the re-ask: `REASK_TEMPERATURE` only where the model was given a lower temperature (a model built
    without one may refuse the parameter), with a seed where the provider takes one: the count of the run's policy
    actions so far, so two re-asks of one run differ and a rerun of the same run samples the same."""
    temperature = getattr(ctx.root_lm, "temperature", None)
    if not (isinstance(temperature, int | float) and not isinstance(temperature, bool)
            and temperature < REASK_TEMPERATURE):
        return {}
    if await ctx.supports("seed"):
        return {"temperature": REASK_TEMPERATURE, "seed": ctx.acted}
    return {"temperature": REASK_TEMPERATURE}
