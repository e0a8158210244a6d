"""The budget meters of a run, the way tqdm shows progress: what is done, what is in flight, the cap.

One row of five meters (turns, sub-calls, tokens, cost, time) shared by the live widget and the static
HTML, with the same figures and words as the JupyterLab extension (extension/src/view.ts). A meter
draws a bar only against a limit that was set: no empty grey bars for limits nobody chose.
"""

from __future__ import annotations

import html
from typing import Any

from .format import fmt_cost, fmt_count, fmt_secs

__all__ = ["meters_html", "sub_calls_text"]

MUTED = "opacity:0.72"
_BAR = "height:5px;background:rgba(127,127,127,0.2);border-radius:3px;margin-top:2px;display:flex;overflow:hidden"


def _limit(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None


def _meter(label: str, text: str, used: float, limit: float | None, ahead: float = 0.0) -> str:
    bar = ""
    if limit:
        done = max(0.0, min(1.0, used / limit))
        colour = "var(--jp-error-color1,#c62828)" if done >= 1 else "var(--jp-brand-color1,#1976d2)"
        bar = (f'<div class="rlmnb-meter-bar" style="{_BAR}"><div style="width:{done * 100:.1f}%;background:{colour}">'
               f'</div>')
        if ahead > 0:
            share = max(0.0, min(1.0 - done, ahead / limit))
            bar += f'<div style="width:{share * 100:.1f}%;background:rgba(25,118,210,0.35)"></div>'
        bar += "</div>"
    return (f'<div class="rlmnb-meter" data-meter="{label}" style="display:inline-block;min-width:150px;'
            f'margin:2px 16px 2px 0;vertical-align:top"><div style="{MUTED};font-size:11px">{html.escape(label)}</div>'
            f'<div class="rlmnb-meter-text" style="font-variant-numeric:tabular-nums">{html.escape(text)}</div>{bar}'
            f'</div>')


def sub_calls_text(m: dict[str, Any]) -> str:
    """"58 (+4 in flight, +38 queued) / 100 · 1 failed": replies in, calls at the provider, calls waiting
    for a concurrency slot, the budget, failures. Once the run has ended (`m["ended"]`) nothing is in flight:
    "136 / 500 · 16 cancelled, 248 not sent"."""
    done, flying, queued = int(m["sub_calls_done"]), int(m["sub_calls_in_flight"]), int(m["sub_calls_queued"])
    limit = _limit(m["max_llm_calls"])
    ended = bool(m.get("ended"))
    text = f"{done:,}"
    if not ended:
        out = [f"+{n:,} {word}" for n, word in ((flying, "in flight"), (queued, "queued")) if n > 0]
        text += f" ({', '.join(out)})" if out else ""
    text += f" / {int(limit):,}" if limit else ""
    if m["sub_errors"]:
        text += f" · {m['sub_errors']:,} failed"
    if ended and flying + queued:
        text += " · " + ", ".join(w for n, w in ((flying, f"{flying:,} cancelled"), (queued, f"{queued:,} not sent"))
                                  if n > 0)
    return text


def meters_html(m: dict[str, Any]) -> str:
    """Turns, sub-calls, tokens, cost and time of the whole run tree, each against its cap when one is set."""
    max_turns, max_calls = _limit(m["max_turns"]), _limit(m["max_llm_calls"])
    max_tokens, max_cost, max_time = _limit(m["max_tokens"]), _limit(m["max_cost"]), _limit(m["max_time"])
    done, sent = int(m["sub_calls_done"]), int(m["sub_calls"])
    tokens = m["input_tokens"] + m["output_tokens"]
    parts = [
        _meter("turns", f"{m['turns']:,}" + (f" / {int(max_turns):,}" if max_turns else ""), m["turns"], max_turns),
        _meter("sub-calls", sub_calls_text(m), done, max_calls, 0 if m.get("ended") else sent - done),
        _meter("tokens", f"{fmt_count(m['input_tokens'])} in · {fmt_count(m['output_tokens'])} out"
               + (f" / {fmt_count(max_tokens)}" if max_tokens else ""), tokens, max_tokens),
        _meter("cost", fmt_cost(m["cost"], m["unpriced"]) + (f" / ${max_cost:g}" if max_cost else ""),
               m["cost"], max_cost),
        _meter("time", fmt_secs(m["elapsed"]) + (f" / {fmt_secs(max_time)}" if max_time else ""), m["elapsed"],
               max_time),
    ]
    return f'<div class="rlmnb-meters">{"".join(parts)}</div>'
