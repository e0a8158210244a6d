"""Adapters for peer RLM implementations, so they run on the same instances as rlmnb.

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
from typing import Any

from ..errors import ConfigError
from ..tasks import Instance
from ..usage import Usage
from .methods import Outcome, Setup
from .tokens import TokenSplit

INSTALL = {"rlms": "pip install rlms", "dspy_rlm": "pip install dspy"}


def peer_method(name: str) -> Any:
    """The adapter for `name`, after checking that its package is installed (ConfigError with the command)."""
    import importlib.util

    module = {"rlms": "rlm", "dspy_rlm": "dspy"}[name]
    if importlib.util.find_spec(module) is None:
        raise ConfigError(f"method {name} needs its package: {INSTALL[name]}")
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


def sampling(setup: Setup) -> dict[str, Any]:
    """The root model's temperature and reply cap, when the evaluation set them."""
    kwargs = getattr(setup.model, "kwargs", {}) or {}
    out = {}
    if kwargs.get("temperature") is not None:
        out["temperature"] = float(kwargs["temperature"])
    cap = kwargs.get("max_tokens") or kwargs.get("max_completion_tokens")
    if cap:
        out["max_tokens"] = int(cap)
    return out


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
        sample = sampling(setup)
        if sample:
            kwargs["sampling_args"] = sample
        sub_kwargs = {**kwargs, "model_name": sub.split("/", 1)[-1]}
        started = time.perf_counter()
        peer = PeerRLM(backend="openai", backend_kwargs=kwargs, other_backends=["openai"],
                       other_backend_kwargs=[sub_kwargs], max_depth=1,
                       max_iterations=int(setup.settings.get("max_iterations", 20)), max_budget=max_cost)
        try:
            result = peer.completion(instance.text, root_prompt=instance.question)
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
        by_model = summary.model_usage_summaries
        root_use, sub_use = by_model.get(kwargs["model_name"]), by_model.get(sub_kwargs["model_name"])
        split = (TokenSplit(root_use.total_input_tokens, root_use.total_output_tokens,
                            sub_use.total_input_tokens + sub_use.total_output_tokens)
                 if root_use is not None and sub_use is not None and root_use is not sub_use else None)
        return Outcome(answer=result.response, status="error" if result.error else "submitted", usage=usage,
                       error=result.error, tokens=split,
                       note="" if split else "rlms reports calls per model, not root vs sub (one model for both)")


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
        options.update(sampling(setup))
        lm = dspy.LM(_model_name(setup.model, "model"), **options)
        sub = dspy.LM(_model_name(setup.sub_model if setup.sub_model is not None else setup.model, "sub_model"),
                      **options)
        program = dspy.RLM("context, question -> answer", sub_lm=sub, interpreter_factory=LocalInterpreter,
                           max_iters=int(setup.settings.get("max_iterations", 20)),
                           max_llm_calls=int(setup.settings.get("max_llm_calls", 200)))
        started = time.perf_counter()
        try:
            with dspy.context(lm=lm, track_usage=True):
                prediction = program(context=instance.text, question=instance.question)
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
        split = TokenSplit.from_sub_usages(usage, (h.get("usage") or {} for h in sub.history))
        return Outcome(answer=prediction.answer, status="submitted", usage=usage, tokens=split)
