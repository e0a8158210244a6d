"""What a run would cost, before it runs: the price of a model and the dry-run cost range.

The range brackets two runs. The low end is a lean run: a few root turns and one pass of the
sub-model over the inputs. The high end spends the whole budget: every root turn (plus the final
fallback call) with a growing conversation, and every allowed sub-call with a full prompt. Both
are capped by `max_tokens` and `max_cost` when set. Prices come from the model object when it
carries them, else from litellm's bundled price table, read as JSON so litellm is not imported.
"""

from __future__ import annotations

import html
import json
import math
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from rlmnb._ground.config import RLMConfig

__all__ = ["CostEstimate", "DryRunReport", "Price", "estimate_run", "known_price", "price_of", "require_price"]

ROOT_REPLY_TOKENS = 400      # a root reply: some reasoning and a snippet
OBSERVATION_TOKENS = 600     # what a snippet's output usually adds to the conversation
SUB_PROMPT_OVERHEAD = 100    # the instruction around a chunk in a sub-call prompt
SUB_REPLY_LOW = 100          # a terse sub-call answer
SUB_REPLY_HIGH = 1_000       # a long sub-call answer
CHUNK_TOKENS = 50_000        # the chunk a sub-call reads, at most half the sub-model's window
LEAN_TURNS = 3               # explore, fan out, submit


@dataclass(frozen=True)
class Price:
    """US dollars per token; `source` says where the figure came from."""

    input_per_token: float
    output_per_token: float
    source: str

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return input_tokens * self.input_per_token + output_tokens * self.output_per_token


@lru_cache(maxsize=1)
def _bundled_prices() -> dict[str, Any]:
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(next(iter(spec.submodule_search_locations))) / "model_prices_and_context_window_backup.json"
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


def _price_table() -> dict[str, Any]:
    litellm = sys.modules.get("litellm")  # already imported: its table includes registered models
    table = getattr(litellm, "model_cost", None) if litellm is not None else None
    return table if isinstance(table, dict) and table else _bundled_prices()


def _table_entry(name: str) -> dict[str, Any] | None:
    table = _price_table()
    candidates = [name]
    if "/" in name:
        candidates.append(name.split("/", 1)[1])
    for key in candidates:
        entry = table.get(key)
        if isinstance(entry, dict) and "input_cost_per_token" in entry:
            return entry
    return None


def price_of(lm: Any) -> Price | None:
    """The price of a model object or litellm model name; None when unknown."""
    if isinstance(lm, str):
        name = lm
    else:
        cost_in = getattr(lm, "input_cost_per_token", None)
        cost_out = getattr(lm, "output_cost_per_token", None)
        if isinstance(cost_in, int | float) and isinstance(cost_out, int | float):
            return Price(float(cost_in), float(cost_out), "the model object")
        if type(lm).__module__.startswith("rlmnb.testing"):
            return Price(0.0, 0.0, "scripted models cost nothing")
        name = str(getattr(lm, "model", None) or getattr(lm, "name", "") or "")
    entry = _table_entry(name) if name else None
    if entry is None:
        return None
    return Price(float(entry.get("input_cost_per_token") or 0.0), float(entry.get("output_cost_per_token") or 0.0),
                 "litellm's price table")


def known_price(lm: Any) -> Price | None:
    """`price_of`, also for a LiteLLM given `input_cost_per_token=` that litellm has not registered yet."""
    own = getattr(lm, "_price", None)
    if isinstance(own, tuple) and len(own) == 2 and own[0] is not None:
        return Price(float(own[0]), float(own[1] or 0.0), "the model's own price")
    return price_of(lm)


def require_price(lm: Any, *, setting: str = "max_cost", how: str = "") -> Price:
    """The price of `lm`, or a ConfigError naming the model and how to give it one (a cost cap needs prices).

    A LiteLLM given `input_cost_per_token=` that litellm has not registered yet counts as priced.
    """
    from rlmnb._ground.errors import ConfigError

    price = known_price(lm)
    if price is None:
        name = lm if isinstance(lm, str) else str(getattr(lm, "name", type(lm).__name__))
        how = how or (f"pass input_cost_per_token= and output_cost_per_token= to LiteLLM({name!r}, ...) "
                      f"(--price {name}=IN,OUT on the command line)")
        raise ConfigError(f"{setting} needs a price for {name}, and it has none: {how}.")
    return price


def context_window_of(lm: Any) -> int | None:
    window = getattr(lm, "context_window", None)
    if isinstance(window, int) and window > 0:
        return window
    name = lm if isinstance(lm, str) else str(getattr(lm, "name", "") or "")
    entry = _price_table().get(name) or (_price_table().get(name.split("/", 1)[1]) if "/" in name else None)
    value = entry.get("max_input_tokens") if isinstance(entry, dict) else None
    return int(value) if isinstance(value, int) and value > 0 else None


@dataclass(frozen=True)
class Scenario:
    """Calls and tokens of one bracketing run."""

    root_calls: int
    root_input: int
    root_output: int
    sub_calls: int
    sub_input: int
    sub_output: int
    cost_usd: float | None = None
    capped: str = ""

    @property
    def tokens(self) -> int:
        return self.root_input + self.root_output + self.sub_input + self.sub_output


@dataclass(frozen=True)
class CostEstimate:
    """A low and a high bracketing run, their costs and what the figures assume."""

    low: Scenario
    high: Scenario
    notes: tuple[str, ...] = ()

    @property
    def low_usd(self) -> float | None:
        return self.low.cost_usd

    @property
    def high_usd(self) -> float | None:
        return self.high.cost_usd

    def cost_text(self) -> str:
        if self.low.cost_usd is None or self.high.cost_usd is None:
            return "unknown (no price known for the model)"
        return f"${self.low.cost_usd:.4f} – ${self.high.cost_usd:.4f}"

    def lines(self) -> list[str]:
        out = [f"Estimated cost: {self.cost_text()}"]
        for label, s in (("low (lean run)", self.low), ("high (whole budget)", self.high)):
            out.append(f"  {label}: {s.root_calls} root call(s), {s.root_input:,} in / {s.root_output:,} out tokens; "
                       f"{s.sub_calls:,} sub-call(s), {s.sub_input:,} in / {s.sub_output:,} out tokens"
                       + (f" ({s.capped})" if s.capped else ""))
        out.extend(f"  {note}" for note in self.notes)
        return out


def estimate_run(*, first_prompt_tokens: int, data_tokens: int, config: RLMConfig, model: Any,
                 sub_model: Any = None) -> CostEstimate:
    """The cost range of a run whose first root request is `first_prompt_tokens` long.

    Args:
        first_prompt_tokens: tokens of the exact first root request (system and user messages).
        data_tokens: estimated tokens of all inputs together (what a full read by sub-calls costs).
        config: the run's settings (turns, sub-calls, context and token/cost caps).
        model, sub_model: model objects or litellm names (sub_model defaults to model).
    """
    sub_model = model if sub_model is None else sub_model
    window = config.max_sub_prompt_tokens or context_window_of(sub_model)
    chunk = min(CHUNK_TOKENS, window // 2) if window else CHUNK_TOKENS
    growth = ROOT_REPLY_TOKENS + OBSERVATION_TOKENS
    data_tokens = max(0, int(data_tokens))

    def root(turns: int) -> tuple[int, int]:
        total = sum(min(first_prompt_tokens + k * growth, max(first_prompt_tokens, config.max_context_tokens))
                    for k in range(turns))
        return total, turns * ROOT_REPLY_TOKENS

    low_turns = min(LEAN_TURNS, config.max_iterations)
    low_in, low_out = root(low_turns)
    low_sub = min(config.max_llm_calls, max(1, math.ceil(data_tokens / chunk))) if data_tokens else 0
    low_sub_in = min(data_tokens, low_sub * chunk) + low_sub * SUB_PROMPT_OVERHEAD
    low = Scenario(low_turns, low_in, low_out, low_sub, low_sub_in, low_sub * SUB_REPLY_LOW)

    high_turns = config.max_iterations + 1  # every turn and the fallback synthesis
    high_in, high_out = root(high_turns)
    per_call = min(chunk, data_tokens) + SUB_PROMPT_OVERHEAD
    high_sub = config.max_llm_calls
    high = Scenario(high_turns, high_in, high_out, high_sub, high_sub * per_call, high_sub * SUB_REPLY_HIGH)

    root_price, sub_price = price_of(model), price_of(sub_model)
    notes: list[str] = []
    for role, lm, price in (("root", model, root_price), ("sub", sub_model, sub_price)):
        name = lm if isinstance(lm, str) else getattr(lm, "name", type(lm).__name__)
        if price is None:
            notes.append(f"{role} model {name}: no price known")
        else:
            notes.append(f"{role} model {name}: ${price.input_per_token * 1e6:g} / "
                         f"${price.output_per_token * 1e6:g} per million input / output tokens ({price.source})")
        if root_price == sub_price and model is sub_model:
            break
    return CostEstimate(_priced(low, root_price, sub_price, config), _priced(high, root_price, sub_price, config),
                        tuple(notes))


def _priced(s: Scenario, root_price: Price | None, sub_price: Price | None, config: RLMConfig) -> Scenario:
    capped = []
    if config.max_tokens is not None and s.tokens > config.max_tokens:
        scale = config.max_tokens / s.tokens
        s = Scenario(s.root_calls, int(s.root_input * scale), int(s.root_output * scale), s.sub_calls,
                     int(s.sub_input * scale), int(s.sub_output * scale))
        capped.append("capped by max_tokens")
    cost = None
    if root_price is not None and sub_price is not None:
        cost = root_price.cost(s.root_input, s.root_output) + sub_price.cost(s.sub_input, s.sub_output)
        if config.max_cost is not None and cost > config.max_cost:
            cost = config.max_cost
            capped.append("capped by max_cost")
    return Scenario(s.root_calls, s.root_input, s.root_output, s.sub_calls, s.sub_input, s.sub_output, cost,
                    ", ".join(capped))


@dataclass(frozen=True)
class DryRunReport:
    """What `%%rlm --dry-run` shows: the InputsSummary, the exact first root prompt, its size and cost."""

    summary: str
    messages: list[dict[str, Any]]
    tokens: int
    estimate: CostEstimate
    data_tokens: int = 0
    models: tuple[str, str] = ("", "")

    def _text(self) -> str:
        lines = [f"Dry run: no model was called. Root model {self.models[0]}, sub-model {self.models[1]}.",
                 f"First root request: {self.tokens:,} tokens; inputs hold ~{self.data_tokens:,} tokens.",
                 *self.estimate.lines(), "", "── Inputs summary ──", self.summary, ""]
        for message in self.messages:
            lines.append(f"── {message['role']} message ──")
            lines.append(str(message.get("content") or ""))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self._text()

    def _repr_html_(self) -> str:
        esc = html.escape
        pre = ("margin:3px 0;padding:6px 8px;background:rgba(127,127,127,0.09);border-radius:4px;"
               "white-space:pre-wrap;word-break:break-word;font-family:var(--jp-code-font-family,monospace);"
               "font-size:12px")
        head = "".join(f"<div>{esc(line)}</div>" for line in self.estimate.lines())
        # the classes keep the notebook's math renderer off "$0.64 – $0.74" (it would read TeX between the $)
        parts = [f'<div class="rlmnb-dry-run tex2jax_ignore mathjax_ignore" style="font-size:13px"><b>Dry run</b>: no model was called. Root model '
                 f'<code>{esc(self.models[0])}</code>, sub-model <code>{esc(self.models[1])}</code>.',
                 f"<div>First root request: <b>{self.tokens:,} tokens</b>; inputs hold ~{self.data_tokens:,} "
                 f"tokens.</div>{head}",
                 f'<details open><summary style="cursor:pointer">Inputs summary</summary>'
                 f'<pre style="{pre}">{esc(self.summary)}</pre></details>']
        for message in self.messages:
            parts.append(f'<details><summary style="cursor:pointer">{esc(message["role"])} message '
                         f'({len(str(message.get("content") or "")):,} characters)</summary>'
                         f'<pre style="{pre}">{esc(str(message.get("content") or ""))}</pre></details>')
        parts.append("</div>")
        return "".join(parts)
