"""The run over time as an inline SVG: root replies and code on the top lane, sub-calls as bars below.

A sub-call's bar is its running time: from the moment it got a concurrency slot to its reply (retries
included). Each bar goes into the first lane free when it starts, so the number of lanes is the peak
number of calls in flight. Time spent waiting for a slot is drawn apart, as a light band above the
lanes whose height is the number of calls queued at that moment. Colours mark errors, retries, rate
limits, cached and slow calls (`slow_cutoff`: above p95 and 1.5x the median). Runs saved before slots were recorded draw each bar from
start to reply, as they did. The same picture as the JupyterLab extension's timeline
(extension/src/trace.ts). Built from the event list on demand (once per draw), never per event.
"""

from __future__ import annotations

import html
from collections.abc import Collection, Iterable
from typing import Any

from rlmnb.views._format import fmt_secs, running_time, slow_cutoff

__all__ = ["COLOURS", "QUEUED", "queue_levels", "timeline_svg"]

WIDTH = 1000  # viewBox units; the SVG scales to the output's width
COLUMNS = 250  # the queue band's resolution (one value per 4 units of width: the peak in that column)
COLOURS = {"root": "#8a8a8a", "code": "#2e7d32", "ok": "#1976d2", "slow": "#8e24aa", "retried": "#ef6c00",
           "rate": "#ff7043", "cached": "#b0b0b0", "error": "#c62828"}
QUEUED = "rgba(25,118,210,0.28)"  # the queue band: lighter than any running bar
LEGEND = (("root", "root model"), ("code", "code"), ("ok", "sub-call (provider time)"),
          ("slow", "slow outlier (above p95, 1.5× median)"),
          ("retried", "retried"), ("rate", "rate-limited"), ("cached", "cached"), ("error", "error"))

Bar = tuple[float, float, str, str, bool]  # start, end, colour, title, drawn faded (the search left it out)
FADED = 0.18  # the opacity of a call the search and filter leave out (the extension's .rlmnb-bar-faded)


def _bars(events: Iterable[Any], shown: Collection[str] | None = None
          ) -> tuple[list[Bar], list[Bar], list[tuple[float, int]], float, float]:
    """(top lane, sub-call running bars, queue changes (time, +1/-1), t0, t1); a call not in `shown` (when
    given) is marked faded."""
    top: list[Bar] = []
    started: dict[str, Any] = {}
    sent: dict[str, float] = {}
    finished: dict[str, Any] = {}
    t0, t1 = float("inf"), 0.0
    for e in events:
        ts = float(e.ts)
        t0, t1 = min(t0, ts), max(t1, ts)
        kind = e.kind
        if kind == "model_reply":
            top.append((ts - float(e.latency_s or 0), ts, "root", f"root model reply · turn {e.turn} · "
                        f"{fmt_secs(e.latency_s)}", False))
        elif kind == "code_executed":
            top.append((ts - float(e.duration_s or 0), ts, "code", f"code · turn {e.turn} · {fmt_secs(e.duration_s)}",
                        False))
        elif kind == "sub_call_started":
            started[e.call_id] = e
        elif kind == "sub_call_sent":
            sent[e.call_id] = ts
        elif kind == "sub_call_finished":
            finished[e.call_id] = e
    running = {k: running_time(f.latency_s, getattr(f, "queued_s", None), bool(f.cached)) for k, f in finished.items()}
    latencies = sorted(v for v in running.values() if v is not None)
    slow = slow_cutoff(latencies)
    calls: list[Bar] = []
    queue: list[tuple[float, int]] = []
    recorded = bool(sent) or any(getattr(f, "queued_s", None) is not None for f in finished.values())
    for index, (call_id, s) in enumerate(started.items(), start=1):
        f = finished.get(call_id)
        meta = (f.meta or {}) if f is not None else {}
        retries, rate = int(meta.get("retries") or 0), int(meta.get("rate_limited") or 0)
        queued = getattr(f, "queued_s", None) if f is not None else None
        end = float(f.ts) if f is not None else t1
        slot: float | None = float(s.ts)  # a run saved before slots were recorded: the bar spans the whole call
        if recorded:
            lat = running.get(call_id)
            if call_id in sent:
                slot = sent[call_id]
            elif f is not None:  # sent, with its time on the reply; or never sent (cached): a tick at its end
                slot = end - lat if lat is not None else end
            else:
                slot = None  # still waiting for a slot when the record ends
            queue.append((float(s.ts), 1))
            queue.append((slot if slot is not None else t1, -1))
        if slot is None:
            continue
        lat = running.get(call_id)
        if f is None or f.error is not None:
            colour = "error"
        elif rate:
            colour = "rate"
        elif retries:
            colour = "retried"
        elif f.cached:
            colour = "cached"
        elif slow is not None and lat is not None and lat > slow:
            colour = "slow"
        else:
            colour = "ok"
        tags = [t for t, on in ((f"retried ×{retries}", retries), (f"rate-limited ×{rate}", rate),
                                ("cached, no provider time" if lat is None else "cached", f is not None and f.cached),
                                ("error", colour == "error")) if on]
        wait = f" · queued {fmt_secs(queued)}" if queued else ""
        took = (fmt_secs(lat) if lat is not None else "no provider time") if f is not None else "no reply"
        title = f"sub-call {index} · turn {s.turn} · {took}{wait}" + (f" · {', '.join(tags)}" if tags else "")
        calls.append((slot, end, colour, title, shown is not None and call_id not in shown))
    return top, calls, queue, t0, t1


def queue_levels(changes: list[tuple[float, int]], t0: float, span: float, columns: int = COLUMNS) -> list[int]:
    """The most calls queued at once in each of `columns` equal slices of the run (O(calls + columns))."""
    changes = sorted(changes)  # at equal times a call leaving the queue (-1) goes first
    levels, count, i = [], 0, 0
    for col in range(columns):
        col_end = t0 + (col + 1) / columns * span
        peak = count
        while i < len(changes) and (changes[i][0] < col_end or col == columns - 1):
            count += changes[i][1]
            peak = max(peak, count)
            i += 1
        levels.append(peak)
    return levels


def _pack(bars: list[Bar]) -> list[list[Bar]]:
    lanes: list[list[Bar]] = []
    ends: list[float] = []
    for bar in sorted(bars, key=lambda b: b[0]):
        i = next((n for n, end in enumerate(ends) if end <= bar[0]), len(ends))
        if i == len(ends):
            ends.append(0.0)
            lanes.append([])
        ends[i] = bar[1]
        lanes[i].append(bar)
    return lanes


def timeline_svg(events: Iterable[Any], shown: Collection[str] | None = None) -> str:
    """An inline SVG of the run with a legend below it ("" when nothing was recorded). `shown`: the call ids
    the trace panel's search and filter keep (None: all); the others are drawn faded, in their lanes."""
    top, calls, queue, t0, t1 = _bars(events, shown)
    if not top and not calls and not queue:
        return ""
    span = max(t1 - t0, 1e-3)

    def x(t: float) -> float:
        return (min(max(t, t0), t0 + span) - t0) / span * WIDTH

    lanes = _pack(calls)
    levels = queue_levels(queue, t0, span) if queue else []
    peak_queued = max(levels, default=0)
    lane_h = 3 if len(lanes) > 60 else 5 if len(lanes) > 20 else 8
    top_h, gap, band_h = 10, 1, (18 if peak_queued else 0)
    base = top_h + 6 + (band_h + 4 if band_h else 0)
    height = base + len(lanes) * (lane_h + gap) + 14
    rects = []

    def rect(bar: Bar, y: int, h: int) -> None:
        left = x(bar[0])
        faded = f' fill-opacity="{FADED}"' if bar[4] else ""
        rects.append(f'<rect x="{left:.2f}" y="{y}" width="{max(0.8, x(bar[1]) - left):.2f}" height="{h}" '
                     f'fill="{COLOURS[bar[2]]}"{faded}>'
                     f'<title>{html.escape(bar[3])}</title></rect>')

    for bar in top:
        rect(bar, 0, top_h)
    if band_h:  # calls waiting for a slot, as a step area: its height is the number queued
        bottom, step = top_h + 6 + band_h, WIDTH / len(levels)
        points = " ".join(f"L{i * step:.1f},{bottom - level / peak_queued * band_h:.1f} "
                          f"L{(i + 1) * step:.1f},{bottom - level / peak_queued * band_h:.1f}"
                          for i, level in enumerate(levels))
        rects.append(f'<path class="rlmnb-queue" d="M0,{bottom} {points} L{WIDTH},{bottom} Z" fill="{QUEUED}">'
                     f'<title>calls queued for a concurrency slot (at most {peak_queued:,} at once)</title></path>')
    for i, lane in enumerate(lanes):
        for bar in lane:
            rect(bar, base + i * (lane_h + gap), lane_h)
    for frac, anchor in ((0.0, "start"), (0.5, "middle"), (1.0, "end")):
        rects.append(f'<text x="{frac * WIDTH:.0f}" y="{height - 2}" text-anchor="{anchor}" font-size="11" '
                     f'fill="currentColor" opacity="0.7">{fmt_secs(frac * span)}</text>')
    svg = (f'<svg class="rlmnb-timeline" viewBox="0 0 {WIDTH} {height}" preserveAspectRatio="none" width="100%" '
           f'height="{height}" style="display:block;background:rgba(127,127,127,0.08);border-radius:3px">'
           f'{"".join(rects)}</svg>')
    swatch = '<span style="display:inline-block;width:10px;height:8px;margin-right:4px;background:{}"></span>'
    legend = "".join(f'<span style="margin-right:12px">{swatch.format(COLOURS[key])}{text}</span>' for key, text in LEGEND)
    if peak_queued:
        legend += f'<span style="margin-right:12px">{swatch.format(QUEUED)}queued (waiting for a slot)</span>'
    flight = f'peak {len(lanes):,} call{"" if len(lanes) == 1 else "s"} in flight'
    if peak_queued:
        flight += f" · peak {peak_queued:,} queued"
    faded = sum(1 for bar in calls if bar[4])
    if shown is not None:
        flight += (f" · {len(calls) - faded:,} of {len(calls):,} sub-call{'' if len(calls) == 1 else 's'} match the "
                   f"search and filter, the rest faded")
    return (f'<div class="rlmnb-timeline-wrap" data-lanes="{len(lanes)}" data-queued="{peak_queued}" '
            f'data-shown="{len(calls) - faded}" style="margin:6px 0">{svg}<div style="font-size:11px;opacity:0.72">{legend}{flight}</div></div>')
