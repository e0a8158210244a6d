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

  - `minrlm` (`pip install minrlm`, 0.1.5): `minrlm.RLM(model, base_url, api_key, max_iterations,
    max_sub_llm_calls, temperature, max_output_tokens).completion(question, context=text)`, its own
    in-process REPL. It uses one model for the root and its `sub_llm` calls: with a different --sub-model
    the row's note says so. Tokens: its result's totals (sub-calls included) and its sub-call counters.
  - `fast_rlm` (`pip install fast-rlm`, 0.5.0): `fast_rlm.run(query, config={primary_agent, sub_agent,
    max_depth=1, max_calls_per_subagent, max_money_spent}, llm_kwargs={temperature, max_tokens})`, an engine
    in Deno (TypeScript, Pyodide REPL) that reads `RLM_MODEL_BASE_URL`/`RLM_MODEL_API_KEY`. Deno must be on
    PATH (`npm install -g deno` works from the npm registry); the engine then fetches its imports, some from
    jsr.io (`@std/yaml`, `@std/dotenv`), so it cannot start where only the package registries are reachable.

  Every package is imported only when its method runs. Models must be litellm-style names
  ("openai/NAME", with `--api-base` for an OpenAI-compatible server); LM objects cannot cross into them.
  Peers get the same model, sampling (`temperature`/`max_tokens` when set) and limits (`--max-iterations`,
  `--max-llm-calls`, `--max-time`) as the other methods, and otherwise their own defaults. A wall-clock bound
  is the evaluation's alone: without `--max-time` no method has one (minrlm's own 120 s default is lifted).
  Every peer runs in a forked child (`run_apart`), since its REPL runs the model's code in its own process;
  with `--max-time` the child is killed `GRACE_S` after the bound, since the peers that have a bound of their
  own (rlms, minrlm: set to it) check it only between turns, and one turn of sub-calls can last hours.
  Usage comes from each package's own accounting; cost is what they report (None when they do not).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from rlmnb._eval.tasks import Instance
from rlmnb._eval.tokens import TokenSplit, split_from_trajectory
from rlmnb._ground.errors import BudgetExhausted, ConfigError
from rlmnb._ground.usage import CallUsage, Usage

__all__ = ["BUILTIN", "DEFAULT_WINDOW", "GRACE_S", "METHOD_NAMES", "PEERS", "REPLY_TOKENS", "RLM_DEFAULTS", "DirectMethod",
           "FastRLMMethod", "Method", "MinRLMMethod", "Outcome", "PEER_INSTALL", "RLMMethod", "Setup", "cut_to_tokens",
           "get_method", "label_of", "peer_method", "run_apart", "sampling"]


DEFAULT_WINDOW = 128_000     # tokens, when neither the user nor litellm knows the root model's window
REPLY_TOKENS = 1_000         # room kept for the direct reply
GRACE_S = 60.0               # a peer past max_time finishes its turn for this long, then is killed
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
    tokens: TokenSplit | None = None  # root input/output and sub-call tokens; None: from usage (see tokens.py)
    trajectory: Any = None  # the run's Trajectory (rlm methods): saved beside results.jsonl for reading


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
                       extra={"refused_calls": refused} if refused else {},
                       tokens=split_from_trajectory(result.usage, result.trajectory), trajectory=result.trajectory)


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
        from rlmnb._ground.prompts import ask_plainly
        from rlmnb._ground.tokens import count_tokens

        text = instance.text
        room = self.window(setup) - REPLY_TOKENS - count_tokens(instance.question) - 100
        if room <= 0:
            raise ConfigError(f"the context window of {setup.model_label} ({self.window(setup):,} tokens) has no "
                              f"room for the input: pass a larger --context-window.")
        shown = cut_to_tokens(text, room, instance.tokens)
        message = ask_plainly(instance.question, text, tokens=instance.tokens, shown_chars=len(shown), room=room)
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
        call = lm.acomplete([{"role": "user", "content": message}])
        if setup.settings.get("max_time"):
            call = asyncio.wait_for(call, float(setup.settings["max_time"]))
        try:
            completion = run_coroutine_blocking(call, on_close=release_model_clients)
        except KeyboardInterrupt:
            raise
        except TimeoutError:
            return Outcome(answer=None, status="budget_exhausted", usage=Usage(wall_s=time.perf_counter() - started),
                           error=f"the reply took longer than max_time ({setup.settings['max_time']:g} s)",
                           extra=extra)
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

PEER_INSTALL = {"rlms": "pip install rlms", "dspy_rlm": "pip install dspy", "minrlm": "pip install minrlm",
                "fast_rlm": "pip install fast-rlm (and Deno: npm install -g deno)"}


def peer_method(name: str) -> Any:
    """The adapter for `name`, after checking that its package is installed (ConfigError with the command)."""
    import importlib.util

    module = {"rlms": "rlm", "dspy_rlm": "dspy", "minrlm": "minrlm", "fast_rlm": "fast_rlm"}[name]
    if importlib.util.find_spec(module) is None:
        raise ConfigError(f"method {name} needs its package: {PEER_INSTALL[name]}")
    adapters = {"rlms": RLMsMethod, "dspy_rlm": DSPyRLMMethod, "minrlm": MinRLMMethod, "fast_rlm": FastRLMMethod}
    return adapters[name]()


def _import_peer(module: str) -> Any:
    """Import a peer's module, keeping this process's SIGINT and SIGTERM handlers as they were.

    A peer that installs its own at import (minrlm's kills the process on Ctrl-C) must not take the
    notebook's interrupt, or the test runner's, away from it.
    """
    import importlib
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():  # no handler can be installed there
        return importlib.import_module(module)
    kept = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return importlib.import_module(module)
    finally:
        for sig, handler in kept.items():
            if handler is not None and signal.getsignal(sig) is not handler:
                signal.signal(sig, handler)


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


def _cap_by_its_plain_name(sample: dict[str, Any]) -> dict[str, Any]:
    """An `extra_body` that sends the reply cap as `max_tokens` too, for an OpenAI-compatible server.

    rlms and litellm (dspy.RLM's client) rename `max_tokens` to `max_completion_tokens` on the wire, which
    llama-cpp-python's server ignores: a reply then runs to the end of the window. With this the request carries
    `max_tokens` too (rlms: both names; litellm sends `max_tokens` alone), which every such server reads.
    """
    return {"max_tokens": sample["max_tokens"]}


class RLMsMethod:
    """The `rlms` package's RLM at depth 1 (sub-calls through its `llm_query`)."""

    name = "rlms"

    def run(self, instance: Instance, setup: Setup, *, max_cost: float | None = None) -> Outcome:
        PeerRLM = _import_peer("rlm").RLM

        model = _model_name(setup.model, "model").split("/", 1)[-1]
        sub = _model_name(setup.sub_model if setup.sub_model is not None else setup.model, "sub_model")
        kwargs: dict[str, Any] = {"model_name": model}
        base, key = _api_base(setup), _api_key(setup)
        if base:
            kwargs["base_url"] = base
        if key:
            kwargs["api_key"] = key
        sample = sampling(setup)
        if base and "max_tokens" in sample:
            sample["extra_body"] = _cap_by_its_plain_name(sample)
        if sample:
            kwargs["sampling_args"] = sample
        sub_kwargs = {**kwargs, "model_name": sub.split("/", 1)[-1]}
        started = time.perf_counter()
        peer = PeerRLM(backend="openai", backend_kwargs=kwargs, other_backends=["openai"],
                       other_backend_kwargs=[sub_kwargs], max_depth=1,
                       max_iterations=int(setup.settings.get("max_iterations", 20)), max_budget=max_cost,
                       max_timeout=setup.settings.get("max_time"))
        try:
            result = peer.completion(instance.text, root_prompt=instance.question)
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            if type(exc).__name__ == "TimeoutExceededError":  # its answer so far, as rlms documents
                return Outcome(getattr(exc, "partial_answer", None), "budget_exhausted",
                               Usage(wall_s=time.perf_counter() - started), error=str(exc)[:300])
            return _failed(started, exc)
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
        dspy = _import_peer("dspy")
        LocalInterpreter = _import_peer("dspy.primitives.local_interpreter").LocalInterpreter

        base, key = _api_base(setup), _api_key(setup)
        options: dict[str, Any] = {"cache": False}
        if base:
            options["api_base"] = base
        if key:
            options["api_key"] = key
        options.update(sampling(setup))
        if base and "max_tokens" in options:
            options["extra_body"] = _cap_by_its_plain_name(options)
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
            return _failed(started, exc)
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


def _names(setup: Setup) -> tuple[str, str]:
    root = _model_name(setup.model, "model").split("/", 1)[-1]
    sub = _model_name(setup.sub_model if setup.sub_model is not None else setup.model, "sub_model")
    return root, sub.split("/", 1)[-1]


def _failed(started: float, exc: Exception) -> Outcome:
    return Outcome(None, "error", Usage(wall_s=time.perf_counter() - started),
                   error=f"{type(exc).__name__}: {str(exc)[:300]}")


class MinRLMMethod:
    """minrlm's RLM (its reasoning-first default) at its own defaults but for model, sampling and limits."""

    name = "minrlm"

    def run(self, instance: Instance, setup: Setup, *, max_cost: float | None = None) -> Outcome:
        MinRLM = _import_peer("minrlm").RLM

        root, sub = _names(setup)
        sample = sampling(setup)
        options: dict[str, Any] = {"model": root, "api_key": _api_key(setup) or os.environ.get("OPENAI_API_KEY")
                                   or "none", "max_iterations": int(setup.settings.get("max_iterations", 20)),
                                   "max_sub_llm_calls": int(setup.settings.get("max_llm_calls", 200)),
                                   "async_batch": False,
                                   # its default is 120 s; the evaluation's bound or none, as for every method
                                   "max_time_seconds": setup.settings.get("max_time") or float("inf")}
        if _api_base(setup):
            options["base_url"] = _api_base(setup)
        if "temperature" in sample:
            options["temperature"] = sample["temperature"]
        if "max_tokens" in sample:
            options["max_output_tokens"] = sample["max_tokens"]
        steps: list[str] = []  # its turns and a timeout, as it reports them (its result says max_iterations)
        options["on_step"] = lambda kind, data: steps.append(kind)
        started = time.perf_counter()
        try:
            peer = MinRLM(**options)
            result = peer.completion(instance.question, context=instance.text)
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            return _failed(started, exc)
        turns = steps.count("thinking") or int(result.iterations)
        sub_calls = int(getattr(peer, "_sub_llm_calls", 0))
        sub_tokens = {"input_tokens": int(getattr(peer, "_sub_llm_input_tokens", 0)),
                      "output_tokens": int(getattr(peer, "_sub_llm_output_tokens", 0))}
        usage = Usage(root_calls=turns, sub_calls=sub_calls, input_tokens=int(result.input_tokens),
                      output_tokens=int(result.output_tokens), cost_usd=0.0,
                      unpriced_calls=turns + sub_calls, wall_s=time.perf_counter() - started)
        note = f"minrlm reads with its root model {root}, not the sub-model {sub}" if sub != root else ""
        return Outcome(answer=result.response, status="budget_exhausted" if "timeout" in steps else "submitted",
                       usage=usage, note=note,
                       tokens=TokenSplit.from_sub_usages(usage, [sub_tokens]))


class FastRLMMethod:
    """fast-rlm's Deno engine at depth 1 (root and sub-agent models as the evaluation's)."""

    name = "fast_rlm"

    def run(self, instance: Instance, setup: Setup, *, max_cost: float | None = None) -> Outcome:
        if shutil.which("deno") is None:
            raise ConfigError("method fast_rlm needs Deno on PATH: npm install -g deno (or see deno.com).")
        fast_rlm = _import_peer("fast_rlm")

        root, sub = _names(setup)
        config: dict[str, Any] = {"primary_agent": root, "sub_agent": sub, "max_depth": 1,
                                  "max_calls_per_subagent": int(setup.settings.get("max_iterations", 20)),
                                  "max_global_calls": int(setup.settings.get("max_llm_calls", 200))
                                  + int(setup.settings.get("max_iterations", 20))}
        if max_cost is not None:
            config["max_money_spent"] = max_cost
        saved = {k: os.environ.get(k) for k in ("RLM_MODEL_BASE_URL", "RLM_MODEL_API_KEY")}
        if _api_base(setup):
            os.environ["RLM_MODEL_BASE_URL"] = str(_api_base(setup))
        if _api_key(setup):
            os.environ["RLM_MODEL_API_KEY"] = str(_api_key(setup))
        started = time.perf_counter()
        try:
            query = f"{instance.question}\n\nThe input (context):\n{instance.text}"
            result = fast_rlm.run(query, config=config, verbose=False, llm_kwargs=sampling(setup) or None)
        except KeyboardInterrupt:
            raise
        except (Exception, SystemExit) as exc:
            return _failed(started, Exception(str(exc)))
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        usage_data = result.get("usage") or {}
        usage = Usage(input_tokens=int(usage_data.get("prompt_tokens") or usage_data.get("input_tokens") or 0),
                      output_tokens=int(usage_data.get("completion_tokens") or usage_data.get("output_tokens") or 0),
                      cost_usd=float(usage_data.get("cost") or 0.0), wall_s=time.perf_counter() - started)
        return Outcome(answer=result.get("results"), status="submitted", usage=usage,
                       note="fast-rlm reports run totals, not root vs sub")


def run_apart(method: Method, instance: Instance, setup: Setup, *, max_cost: float | None = None) -> Outcome:
    """`method.run` in a forked child process with its own process group; the runner runs every peer so.

    A peer's REPL runs the model's code in its own process: apart, that is never this one (a notebook's kernel
    with `rlmnb.evaluation`), and a crash there is one row's error. With `setup.settings["max_time"]` the child
    is killed, with whatever it started, `GRACE_S` after it: a hard bound on code that is not ours. Killed, the
    run is `budget_exhausted` with no answer and only its wall time known. A ConfigError in the child (a missing
    tool) is raised here, as from `method.run`. Forked, not spawned: the setup's models hold locks and cannot be
    pickled, and a peer builds its own clients, so it needs nothing another thread of this process could hold."""
    import multiprocessing
    import signal

    bound = setup.settings.get("max_time")
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)

    def child() -> None:
        os.setsid()  # one group: the kill reaches whatever the peer started
        started = time.perf_counter()
        reply: Outcome | ConfigError
        try:
            reply = method.run(instance, setup, max_cost=max_cost)
        except ConfigError as exc:
            reply = exc
        except BaseException as exc:  # the parent gets a row, never a silent death
            reply = _failed(started, Exception(f"{type(exc).__name__}: {exc}"))
        send.send(reply)

    started = time.perf_counter()
    process = context.Process(target=child, daemon=True)
    process.start()
    send.close()
    try:
        if receive.poll(None if bound is None else float(bound) + GRACE_S):
            try:
                reply = receive.recv()
            except EOFError:
                reply = _failed(started, RuntimeError(f"the {method.name} run died (exit {process.exitcode})"))
            process.join(10)
            if isinstance(reply, ConfigError):
                raise reply
            outcome: Outcome = reply
            return outcome
    finally:
        if process.is_alive() and process.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # its group: setsid made the child its leader
            process.join()
        receive.close()
    return Outcome(None, "budget_exhausted", Usage(wall_s=time.perf_counter() - started),
                   error=f"{method.name} ran past max_time ({bound:g} s) and was stopped", extra={"killed": True})


# ---- by name -------------------------------------------------------------------------------------

BUILTIN = ("rlm", "rlm_no_sub", "direct")
PEERS = ("rlms", "dspy_rlm", "minrlm", "fast_rlm")
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
