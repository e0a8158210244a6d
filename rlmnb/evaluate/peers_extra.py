"""Adapters for two more peer RLM packages: `minrlm` and `fast_rlm`, on the same model, sampling and limits.

- `minrlm` (`pip install minrlm`, 0.1.5): `minrlm.RLM(model, base_url, api_key, max_iterations,
  max_sub_llm_calls, temperature, max_output_tokens).completion(question, context=text)`, its own
  in-process REPL. It uses one model for the root and its `sub_llm` calls: with a different --sub-model
  the row's note says so. Tokens: its result's totals (sub-calls included) and its sub-call counters.
- `fast_rlm` (`pip install fast-rlm`, 0.5.0): `fast_rlm.run(query, config={primary_agent, sub_agent,
  max_depth=1, max_calls_per_subagent, max_money_spent}, llm_kwargs={temperature, max_tokens})`, an engine
  in Deno (TypeScript, Pyodide REPL) that reads `RLM_MODEL_BASE_URL`/`RLM_MODEL_API_KEY`. Deno must be on
  PATH (`npm install -g deno` works from the npm registry); the engine then fetches its imports, some from
  jsr.io (`@std/yaml`, `@std/dotenv`), so it cannot start where only the package registries are reachable.

Same model and limits as the other methods: the root and sub-model names, `--api-base`/`--api-key`,
`--max-iterations` and `--max-llm-calls`, and the models' `temperature`/`max_tokens` when set.
"""

from __future__ import annotations

import os
import shutil
import time
from typing import Any

from rlmnb.errors import ConfigError
from rlmnb.evaluate.methods import Outcome, Setup
from rlmnb.evaluate.peers import _api_base, _api_key, _model_name, sampling
from rlmnb.evaluate.tokens import TokenSplit
from rlmnb.tasks import Instance
from rlmnb.usage import Usage

INSTALL = {"minrlm": "pip install minrlm", "fast_rlm": "pip install fast-rlm (and Deno: npm install -g deno)"}


def extra_peer(name: str) -> Any:
    """The adapter for `name`, after checking its package (ConfigError with the install command)."""
    import importlib.util

    if importlib.util.find_spec(name) is None:
        raise ConfigError(f"method {name} needs its package: {INSTALL[name]}")
    return MinRLMMethod() if name == "minrlm" else FastRLMMethod()


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
        from minrlm import RLM as MinRLM

        root, sub = _names(setup)
        sample = sampling(setup)
        options: dict[str, Any] = {"model": root, "api_key": _api_key(setup) or os.environ.get("OPENAI_API_KEY")
                                   or "none", "max_iterations": int(setup.settings.get("max_iterations", 20)),
                                   "max_sub_llm_calls": int(setup.settings.get("max_llm_calls", 200)),
                                   "async_batch": False}
        if _api_base(setup):
            options["base_url"] = _api_base(setup)
        if "temperature" in sample:
            options["temperature"] = sample["temperature"]
        if "max_tokens" in sample:
            options["max_output_tokens"] = sample["max_tokens"]
        started = time.perf_counter()
        try:
            peer = MinRLM(**options)
            result = peer.completion(instance.question, context=instance.text)
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            return _failed(started, exc)
        sub_calls = int(getattr(peer, "_sub_llm_calls", 0))
        sub_tokens = {"input_tokens": int(getattr(peer, "_sub_llm_input_tokens", 0)),
                      "output_tokens": int(getattr(peer, "_sub_llm_output_tokens", 0))}
        usage = Usage(root_calls=int(result.iterations), sub_calls=sub_calls, input_tokens=int(result.input_tokens),
                      output_tokens=int(result.output_tokens), cost_usd=0.0,
                      unpriced_calls=int(result.iterations) + sub_calls, wall_s=time.perf_counter() - started)
        note = f"minrlm reads with its root model {root}, not the sub-model {sub}" if sub != root else ""
        return Outcome(answer=result.response, status="submitted", usage=usage, note=note,
                       tokens=TokenSplit.from_sub_usages(usage, [sub_tokens]))


class FastRLMMethod:
    """fast-rlm's Deno engine at depth 1 (root and sub-agent models as the evaluation's)."""

    name = "fast_rlm"

    def run(self, instance: Instance, setup: Setup, *, max_cost: float | None = None) -> Outcome:
        if shutil.which("deno") is None:
            raise ConfigError("method fast_rlm needs Deno on PATH: npm install -g deno (or see deno.com).")
        import fast_rlm

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
