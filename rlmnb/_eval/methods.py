"""The methods an evaluation compares on the same instances, and picking one by name (`get_method`).

- `rlm`: a Recursive Language Model at depth 1 (the root writes code, `llm_query` reads pieces).
- `rlm_no_sub`: the same REPL with no sub-calls (`max_llm_calls=0`): the root manages with code alone.
- `direct`: the whole input in one prompt to the root model, cut to its context window; the prompt says
  how much was cut, so the model knows it sees a prefix.
- Peers, adapters for other RLM implementations run on the same instances:
  - `rlms`: the RLM paper's package (`pip install rlms`, imported as `rlm`): `RLM(backend="openai",
    backend_kwargs={...}).completion(context, root_prompt=question)`, its own local REPL.
  - `dspy_rlm`: DSPy's `dspy.RLM` (`pip install dspy`) with signature `context, question -> answer`, run in
    DSPy's `LocalInterpreter` (its default Deno/Pyodide sandbox needs a Deno download).

  Both packages are imported only when their method runs. Models must be litellm-style names
  ("openai/NAME", with `--api-base` for an OpenAI-compatible server); LM objects cannot cross into them.
  Usage comes from each package's own accounting; cost is what they report (None when they do not).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from rlmnb._eval.tasks import Instance
from rlmnb._ground.errors import BudgetExhausted, ConfigError
from rlmnb._ground.usage import CallUsage, Usage

__all__ = ["BUILTIN", "DEFAULT_WINDOW", "METHOD_NAMES", "PEERS", "REPLY_TOKENS", "RLM_DEFAULTS", "DirectMethod",
           "Method", "Outcome", "PEER_INSTALL", "RLMMethod", "Setup", "cut_to_tokens", "get_method", "label_of",
           "peer_method"]


DEFAULT_WINDOW = 128_000     # tokens, when neither the user nor litellm knows the root model's window
REPLY_TOKENS = 1_000         # room kept for the direct reply
# a snippet that fans out hundreds of sub-calls over a 10M-token input needs more than the interactive 60 s
# (docs/decisions/eval-snippet-timeout.md)
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
        from rlmnb._api import RLM

        model, sub_model = setup.model, setup.sub_model if setup.sub_model is not None else setup.model
        wallet = None
        if max_cost is not None:
            from rlmnb._eval.cost import Wallet, guard

            wallet = Wallet(max_cost)
            model, sub_model = guard(model, wallet, role="model"), guard(sub_model, wallet, role="sub_model")
        return RLM(model, sub_model, **self.settings(setup, max_cost)), wallet

    def run(self, instance: Instance, setup: Setup, *, max_cost: float | None = None) -> Outcome:
        rlm, wallet = self.build(setup, max_cost)
        result = rlm.run(instance.question, **instance.inputs)
        answer = result.answer if result.status in ("submitted", "fallback") else None
        refused = wallet.refused if wallet is not None else 0
        return Outcome(answer=answer, status=result.status, usage=result.usage, error=result.error,
                       note=result.reason if result.status not in ("submitted",) else "",
                       extra={"refused_calls": refused} if refused else {})


class DirectMethod:
    """The input in the prompt, cut to the root model's context window."""

    name = "direct"

    def window(self, setup: Setup) -> int:
        from rlmnb._engine.estimate import context_window_of

        if setup.context_window:
            return int(setup.context_window)
        model = setup.model
        known = context_window_of(model)
        return known or DEFAULT_WINDOW

    def prompt(self, instance: Instance, setup: Setup) -> tuple[str, dict[str, Any]]:
        """The one user message, and how much of the input it holds."""
        from rlmnb._ground.prompts import render
        from rlmnb._ground.tokens import count_tokens

        text = instance.inputs["context"]
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
        from rlmnb._ground.blocking import run_coroutine_blocking
        from rlmnb._models.resolve import release_model_clients, resolve_model

        message, extra = self.prompt(instance, setup)
        lm = resolve_model(setup.model, role="model")
        if max_cost is not None:
            from rlmnb._eval.cost import Wallet, guard

            lm = guard(lm, Wallet(max_cost), role="model")
        started = time.perf_counter()
        try:
            completion = run_coroutine_blocking(lm.acomplete([{"role": "user", "content": message}]),
                                                on_close=release_model_clients)
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
    from rlmnb._ground.tokens import count_tokens

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


# ---- peers: other RLM implementations ------------------------------------------------------------

PEER_INSTALL = {"rlms": "pip install rlms", "dspy_rlm": "pip install dspy"}


def peer_method(name: str) -> Any:
    """The adapter for `name`, after checking that its package is installed (ConfigError with the command)."""
    import importlib.util

    module = {"rlms": "rlm", "dspy_rlm": "dspy"}[name]
    if importlib.util.find_spec(module) is None:
        raise ConfigError(f"method {name} needs its package: {PEER_INSTALL[name]}")
    return RLMsMethod() if name == "rlms" else DSPyRLMMethod()


def _model_name(model: Any, role: str) -> str:
    if isinstance(model, str):
        return model
    name = getattr(model, "name", None)
    if type(model).__name__ == "LiteLLM" and isinstance(name, str):
        return name
    raise ConfigError(f"peer methods need the {role} as a litellm model name, not {type(model).__name__}.")


def _api_base(setup: Setup) -> str | None:
    base = getattr(setup.model, "kwargs", {}).get("api_base")
    return str(base) if base else None


def _api_key(setup: Setup) -> str | None:
    key = getattr(setup.model, "kwargs", {}).get("api_key")
    return str(key) if key else None


class RLMsMethod:
    """The `rlms` package's RLM at depth 1 (sub-calls through its `llm_query`)."""

    name = "rlms"

    def run(self, instance: Instance, setup: Setup, *, max_cost: float | None = None) -> Outcome:
        from rlm import RLM as PeerRLM

        model = _model_name(setup.model, "model").split("/", 1)[-1]
        sub = _model_name(setup.sub_model if setup.sub_model is not None else setup.model, "sub_model")
        kwargs: dict[str, Any] = {"model_name": model}
        base, key = _api_base(setup), _api_key(setup)
        if base:
            kwargs["base_url"] = base
        if key:
            kwargs["api_key"] = key
        sub_kwargs = {**kwargs, "model_name": sub.split("/", 1)[-1]}
        started = time.perf_counter()
        peer = PeerRLM(backend="openai", backend_kwargs=kwargs, other_backends=["openai"],
                       other_backend_kwargs=[sub_kwargs], max_depth=1,
                       max_iterations=int(setup.settings.get("max_iterations", 20)), max_budget=max_cost)
        try:
            result = peer.completion(instance.inputs["context"], root_prompt=instance.question)
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            return Outcome(None, "error", Usage(wall_s=time.perf_counter() - started),
                           error=f"{type(exc).__name__}: {str(exc)[:300]}")
        summary = result.usage_summary
        calls = sum(s.total_calls for s in summary.model_usage_summaries.values())
        usage = Usage(root_calls=0, sub_calls=calls, input_tokens=summary.total_input_tokens,
                      output_tokens=summary.total_output_tokens, cost_usd=summary.total_cost or 0.0,
                      unpriced_calls=0 if summary.total_cost is not None else calls,
                      wall_s=time.perf_counter() - started)
        return Outcome(answer=result.response, status="error" if result.error else "submitted", usage=usage,
                       error=result.error, note="rlms reports calls per model, not root vs sub")


class DSPyRLMMethod:
    """DSPy's `dspy.RLM` with `context, question -> answer` in its LocalInterpreter."""

    name = "dspy_rlm"

    def run(self, instance: Instance, setup: Setup, *, max_cost: float | None = None) -> Outcome:
        import dspy
        from dspy.primitives.local_interpreter import LocalInterpreter

        base, key = _api_base(setup), _api_key(setup)
        options: dict[str, Any] = {"cache": False}
        if base:
            options["api_base"] = base
        if key:
            options["api_key"] = key
        lm = dspy.LM(_model_name(setup.model, "model"), **options)
        sub = dspy.LM(_model_name(setup.sub_model if setup.sub_model is not None else setup.model, "sub_model"),
                      **options)
        program = dspy.RLM("context, question -> answer", sub_lm=sub, interpreter_factory=LocalInterpreter,
                           max_iters=int(setup.settings.get("max_iterations", 20)),
                           max_llm_calls=int(setup.settings.get("max_llm_calls", 200)))
        started = time.perf_counter()
        try:
            with dspy.context(lm=lm, track_usage=True):
                prediction = program(context=instance.inputs["context"], question=instance.question)
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            return Outcome(None, "error", Usage(wall_s=time.perf_counter() - started),
                           error=f"{type(exc).__name__}: {str(exc)[:300]}")
        usage_by_model = prediction.get_lm_usage() or {}
        input_tokens = sum(int(u.get("prompt_tokens") or 0) for u in usage_by_model.values())
        output_tokens = sum(int(u.get("completion_tokens") or 0) for u in usage_by_model.values())
        cost = sum(float(h.get("cost") or 0.0) for h in [*lm.history, *sub.history])
        usage = Usage(root_calls=len(lm.history), sub_calls=len(sub.history), input_tokens=input_tokens,
                      output_tokens=output_tokens, cost_usd=cost,
                      unpriced_calls=sum(1 for h in [*lm.history, *sub.history] if h.get("cost") is None),
                      wall_s=time.perf_counter() - started)
        return Outcome(answer=prediction.answer, status="submitted", usage=usage)


# ---- by name -------------------------------------------------------------------------------------

BUILTIN = ("rlm", "rlm_no_sub", "direct")
PEERS = ("rlms", "dspy_rlm")
METHOD_NAMES = BUILTIN + PEERS


def get_method(name: str) -> Method:
    """The method called `name`; ConfigError listing the names otherwise (peers check their package)."""
    key = name.strip().lower().replace("-", "_").replace(".", "_")
    if key == "rlm":
        return RLMMethod("rlm")
    if key == "rlm_no_sub":
        return RLMMethod("rlm_no_sub", sub_calls=False)
    if key == "direct":
        return DirectMethod()
    if key in PEERS:
        peer: Method = peer_method(key)
        return peer
    raise ConfigError(f"unknown method {name!r}: choose from {', '.join(METHOD_NAMES)}.")
