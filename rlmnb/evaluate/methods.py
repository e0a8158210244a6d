"""The methods an evaluation compares on the same instances.

- `rlm`: a Recursive Language Model at depth 1 (the root writes code, `llm_query` reads pieces).
- `rlm_no_sub`: the same REPL with no sub-calls (`max_llm_calls=0`): the root manages with code alone.
- `direct`: the whole input in one prompt to the root model, cut to its context window; the prompt says
  how much was cut, so the model knows it sees a prefix.
Peer implementations (`rlms`, `dspy_rlm`) live in `peers.py`; `choose.py` looks every method up by name.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import BudgetExhausted, ConfigError
from ..tasks import Instance
from ..usage import CallUsage, Usage
from .tokens import TokenSplit

DEFAULT_WINDOW = 128_000     # tokens, when neither the user nor litellm knows the root model's window
REPLY_TOKENS = 1_000         # room kept for the direct reply
# Evaluations read whole inputs of up to 10M tokens: a snippet that fans out hundreds of sub-calls and
# aggregates their answers needs more than the interactive 60 s (measured: ~80 s at 10M on a busy 2-core box)
RLM_DEFAULTS: dict[str, Any] = {"max_llm_calls": 200, "max_iterations": 20, "timeout": 600.0}


@dataclass(frozen=True)
class Setup:
    """The models and settings every method of one evaluation shares.

    `model`/`sub_model`: litellm names or LM objects; `settings`: RLM settings (sandbox, max_iterations...);
    `context_window`: the root model's window for `direct` (None: ask litellm, else DEFAULT_WINDOW).
    """

    model: Any
    sub_model: Any = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    context_window: int | None = None

    @property
    def model_label(self) -> str:
        return label_of(self.model)

    @property
    def sub_label(self) -> str:
        return label_of(self.sub_model if self.sub_model is not None else self.model)


def label_of(model: Any) -> str:
    if isinstance(model, str):
        return model
    return str(getattr(model, "model", None) or getattr(model, "name", None) or type(model).__name__)


@dataclass(frozen=True)
class Outcome:
    """What a method produced for one instance: the answer, the bill, and notes for the row."""

    answer: Any
    status: str
    usage: Usage
    error: str | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    tokens: TokenSplit | None = None  # root input/output and sub-call tokens; None: from usage (see tokens.py)


class Method(Protocol):
    name: str

    def run(self, instance: Instance, setup: Setup, *, max_cost: float | None = None) -> Outcome: ...


class RLMMethod:
    """`rlm` (sub-calls on) or `rlm_no_sub` (none: the root has only code)."""

    def __init__(self, name: str = "rlm", *, sub_calls: bool = True) -> None:
        self.name = name
        self.sub_calls = sub_calls

    def settings(self, setup: Setup, max_cost: float | None = None) -> dict[str, Any]:
        settings = {**RLM_DEFAULTS, **dict(setup.settings)}
        if not self.sub_calls:
            settings["max_llm_calls"] = 0
        if max_cost is not None:
            settings["max_cost"] = max_cost if settings.get("max_cost") is None else min(max_cost,
                                                                                         settings["max_cost"])
        return settings

    def rlm(self, setup: Setup, max_cost: float | None = None) -> Any:
        """The RLM of one run; with `max_cost`, its models are guarded so no call can pass the limit."""
        return self.build(setup, max_cost)[0]

    def build(self, setup: Setup, max_cost: float | None = None) -> tuple[Any, Any]:
        """The RLM of one run and the Wallet guarding its models (None without `max_cost`)."""
        from ..api import RLM

        model, sub_model = setup.model, setup.sub_model if setup.sub_model is not None else setup.model
        wallet = None
        if max_cost is not None:
            from .wallet import Wallet, guard

            wallet = Wallet(max_cost)
            model, sub_model = guard(model, wallet, role="model"), guard(sub_model, wallet, role="sub_model")
        return RLM(model, sub_model, **self.settings(setup, max_cost)), wallet

    def run(self, instance: Instance, setup: Setup, *, max_cost: float | None = None) -> Outcome:
        rlm, wallet = self.build(setup, max_cost)
        result = rlm.run(instance.question, **instance.inputs)
        answer = result.answer if result.status in ("submitted", "fallback") else None
        refused = wallet.refused if wallet is not None else 0
        from .tokens import split_from_trajectory

        return Outcome(answer=answer, status=result.status, usage=result.usage, error=result.error,
                       note=result.reason if result.status not in ("submitted",) else "",
                       extra={"refused_calls": refused} if refused else {},
                       tokens=split_from_trajectory(result.usage, result.trajectory))


class DirectMethod:
    """The input in the prompt, cut to the root model's context window."""

    name = "direct"

    def window(self, setup: Setup) -> int:
        from ..estimate import context_window_of

        if setup.context_window:
            return int(setup.context_window)
        model = setup.model
        known = context_window_of(model)
        return known or DEFAULT_WINDOW

    def prompt(self, instance: Instance, setup: Setup) -> tuple[str, dict[str, Any]]:
        """The one user message, and how much of the input it holds."""
        from ..prompts import render
        from ..tokens import count_tokens

        text = instance.text
        room = self.window(setup) - REPLY_TOKENS - count_tokens(instance.question) - 100
        if room <= 0:
            raise ConfigError(f"the context window of {setup.model_label} ({self.window(setup):,} tokens) has no "
                              f"room for the input: pass a larger --context-window.")
        shown = cut_to_tokens(text, room, instance.tokens)
        if len(shown) == len(text):
            note = f"all of it, ~{instance.tokens:,} tokens"
        else:
            note = (f"CUT to its first {len(shown) / len(text):.1%} (~{room:,} of ~{instance.tokens:,} tokens) to fit "
                    f"the context window; the rest is not shown")
        message = render("eval_direct", question=instance.question, shown=note, context=shown)
        return message, {"visible_chars": len(shown), "visible_fraction": round(len(shown) / max(1, len(text)), 6)}

    def run(self, instance: Instance, setup: Setup, *, max_cost: float | None = None) -> Outcome:
        from ..lm_factory import resolve_model
        from .runtime import run_blocking

        message, extra = self.prompt(instance, setup)
        lm = resolve_model(setup.model, role="model")
        if max_cost is not None:
            from .wallet import Wallet, guard

            lm = guard(lm, Wallet(max_cost), role="model")
        started = time.perf_counter()
        try:
            completion = run_blocking(lm.acomplete([{"role": "user", "content": message}]))
        except KeyboardInterrupt:
            raise
        except BudgetExhausted as exc:  # the --max-cost guard refused the call: nothing was sent
            return Outcome(answer=None, status="budget_exhausted", usage=Usage(), error=str(exc),
                           extra={**extra, "refused_calls": 1})
        except Exception as exc:  # a provider error is this instance's failure, not the evaluation's
            wall = time.perf_counter() - started
            return Outcome(answer=None, status="error", usage=Usage(wall_s=wall),
                           error=f"{type(exc).__name__}: {str(exc)[:300]}", extra=extra)
        usage = Usage().add_call(completion.usage or CallUsage(), root=True).with_wall(time.perf_counter() - started)
        note = "" if extra["visible_fraction"] >= 1 else f"input cut to {extra['visible_fraction']:.1%}"
        return Outcome(answer=completion.text.strip(), status="submitted", usage=usage, note=note, extra=extra)


def cut_to_tokens(text: str, tokens: int, total_tokens: int) -> str:
    """The longest prefix of `text` (ending at a line break) that stays within `tokens`, by exact count."""
    from ..tokens import count_tokens

    if total_tokens <= tokens:
        return text
    chars = int(len(text) * tokens / max(1, total_tokens))
    for _ in range(4):
        head = text[:chars]
        cut = head.rfind("\n")
        head = head[:cut] if cut > 0 else head
        counted = count_tokens(head)
        if counted <= tokens:
            return head
        chars = int(chars * tokens / counted * 0.98)
    return head
