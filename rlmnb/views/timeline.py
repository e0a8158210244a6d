"""The run over time as an inline SVG: root replies and code on the top lane, sub-calls as bars below.

Each sub-call goes into the first lane free when it starts, so the number of lanes is the peak number
of calls in flight; colours mark errors, retries, rate limits, cached and slow (above p95) calls.
The same picture as the JupyterLab extension's timeline (extension/src/trace.ts). Built from the
event list on demand (once per draw), never per event.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

from .format import fmt_secs, percentile

__all__ = ["COLOURS", "timeline_svg"]

WIDTH = 1000  # viewBox units; the SVG scales to the output's width
COLOURS = {"root": "#8a8a8a", "code": "#2e7d32", "ok": "#1976d2", "slow": "#8e24aa", "retried": "#ef6c00",
           "rate": "#ff7043", "cached": "#b0b0b0", "error": "#c62828"}
LEGEND = (("root", "root model"), ("code", "code"), ("ok", "sub-call"), ("slow", "slow (above p95)"),
          ("retried", "retried"), ("rate", "rate-limited"), ("cached", "cached"), ("error", "error"))


def _bars(events: Iterable[Any]) -> tuple[list[tuple[float, float, str, str]], list[tuple[float, float, str, str]],
                                          float, float]:
    top: list[tuple[float, float, str, str]] = []
    started: dict[str, Any] = {}
    finished: dict[str, Any] = {}
    t0, t1 = float("inf"), 0.0
    for e in events:
        ts = float(e.ts)
        t0, t1 = min(t0, ts), max(t1, ts)
        kind = e.kind
        if kind == "model_reply":
            top.append((ts - float(e.latency_s or 0), ts, "root", f"root model reply · turn {e.turn} · "
                        f"{fmt_secs(e.latency_s)}"))
        elif kind == "code_executed":
            top.append((ts - float(e.duration_s or 0), ts, "code", f"code · turn {e.turn} · {fmt_secs(e.duration_s)}"))
        elif kind == "sub_call_started":
            started[e.call_id] = e
        elif kind == "sub_call_finished":
            finished[e.call_id] = e
    latencies = sorted(float(f.latency_s) for f in finished.values())
    slow = percentile(latencies, 95) if len(latencies) >= 20 else None
    calls = []
    for index, (call_id, s) in enumerate(started.items(), start=1):
        f = finished.get(call_id)
        meta = (f.meta or {}) if f is not None else {}
        retries, rate = int(meta.get("retries") or 0), int(meta.get("rate_limited") or 0)
        if f is None or f.error is not None:
            colour = "error"
        elif rate:
            colour = "rate"
        elif retries:
            colour = "retried"
        elif f.cached:
            colour = "cached"
        elif slow is not None and f.latency_s > slow:
            colour = "slow"
        else:
            colour = "ok"
        end = float(f.ts) if f is not None else t1
        tags = [t for t, on in ((f"retried ×{retries}", retries), (f"rate-limited ×{rate}", rate),
                                ("cached", f is not None and f.cached), ("error", colour == "error")) if on]
        title = (f"sub-call {index} · turn {s.turn} · " + (fmt_secs(f.latency_s) if f is not None else "no reply")
                 + (f" · {', '.join(tags)}" if tags else ""))
        calls.append((float(s.ts), end, colour, title))
    return top, calls, t0, t1


def _pack(bars: list[tuple[float, float, str, str]]) -> list[list[tuple[float, float, str, str]]]:
    lanes: list[list[tuple[float, float, str, str]]] = []
    ends: list[float] = []
    for bar in sorted(bars, key=lambda b: b[0]):
        i = next((n for n, end in enumerate(ends) if end <= bar[0]), len(ends))
        if i == len(ends):
            ends.append(0.0)
            lanes.append([])
        ends[i] = bar[1]
        lanes[i].append(bar)
    return lanes


def timeline_svg(events: Iterable[Any]) -> str:
    """An inline SVG of the run with a legend below it ("" when nothing was recorded)."""
    top, calls, t0, t1 = _bars(events)
    if not top and not calls:
        return ""
    span = max(t1 - t0, 1e-3)

    def x(t: float) -> float:
        return (min(max(t, t0), t0 + span) - t0) / span * WIDTH

    lanes = _pack(calls)
    lane_h = 3 if len(lanes) > 60 else 5 if len(lanes) > 20 else 8
    top_h, gap = 10, 1
    height = top_h + 6 + len(lanes) * (lane_h + gap) + 14
    rects = []

    def rect(bar: tuple[float, float, str, str], y: int, h: int) -> None:
        left = x(bar[0])
        rects.append(f'<rect x="{left:.2f}" y="{y}" width="{max(0.8, x(bar[1]) - left):.2f}" height="{h}" '
                     f'fill="{COLOURS[bar[2]]}"><title>{html.escape(bar[3])}</title></rect>')

    for bar in top:
        rect(bar, 0, top_h)
    for i, lane in enumerate(lanes):
        for bar in lane:
            rect(bar, top_h + 6 + i * (lane_h + gap), lane_h)
    for frac, anchor in ((0.0, "start"), (0.5, "middle"), (1.0, "end")):
        rects.append(f'<text x="{frac * WIDTH:.0f}" y="{height - 2}" text-anchor="{anchor}" font-size="11" '
                     f'fill="currentColor" opacity="0.7">{fmt_secs(frac * span)}</text>')
    svg = (f'<svg class="rlmnb-timeline" viewBox="0 0 {WIDTH} {height}" preserveAspectRatio="none" width="100%" '
           f'height="{height}" style="display:block;background:rgba(127,127,127,0.08);border-radius:3px">'
           f'{"".join(rects)}</svg>')
    legend = "".join(f'<span style="margin-right:12px"><span style="display:inline-block;width:10px;height:8px;'
                     f'margin-right:4px;background:{COLOURS[key]}"></span>{text}</span>' for key, text in LEGEND)
    return (f'<div class="rlmnb-timeline-wrap" data-lanes="{len(lanes)}" style="margin:6px 0">{svg}'
            f'<div style="font-size:11px;opacity:0.72">{legend}peak {len(lanes):,} call'
            f'{"" if len(lanes) == 1 else "s"} in flight</div></div>')
