"""Number, time and text formatting shared by every view of a run (HTML, text, the live widget).

Pure functions of plain values, so the HTML and the text views print the same figures the same way.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from rlmnb._ground.text import clip as clip_text
from rlmnb._ground.usage import cost_text as fmt_cost  # one wording of a cost for every view and the CLI

__all__ = ["ASKED_AGAIN", "EVIDENCE_POLICIES", "POLICY_ACTIONS", "QUOTE_NOTE", "STATUS_LABELS", "answer_text", "clip",
           "turn_title", "fmt_clock", "fmt_cost", "fmt_count", "fmt_rate",
           "fmt_secs", "left_out_marker", "map_figures", "more_label", "pending_turn_text", "percentile", "policy_note",
           "progress_text", "prompt_cache_text", "queue_text", "quote_notes", "replayed_turn", "resumed_text",
           "running_time", "slow_cutoff"]

STATUS_LABELS = {"running": "running", "submitted": "answered", "fallback": "fallback answer",
                 "budget_exhausted": "budget exhausted", "interrupted": "interrupted", "error": "error",
                 "waiting": "starting…"}


def fmt_count(n: int | float | None) -> str:
    """12,345 below 100k, then 123.4k / 1.23M."""
    if n is None:
        return "?"
    n = int(n)
    if n < 100_000:
        return f"{n:,}"
    if n < 1_000_000:
        return f"{n / 1e3:.1f}k"
    return f"{n / 1e6:.2f}M"


def prompt_cache_text(cached_input_tokens: int | float | None, saved: float | None = None) -> str:
    """"1,024 cached" (input tokens the provider read from its prompt cache), with ", saved $0.0009" when that
    saved money; "" when nothing was cached, so views of runs without prompt caching read as before."""
    if not cached_input_tokens:
        return ""
    return f"{fmt_count(cached_input_tokens)} cached" + (f", saved ${saved:.4f}" if saved else "")


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def resumed_text(mark: dict[str, Any], *, full_path: bool = False) -> str:
    """The words of a resumed run's mark (RunTree.resumed_view), the same in every view (format.ts has the
    twin): the journal it resumed from and what that served at no cost."""
    source = str(mark.get("source") or "")
    name = source if full_path else source.replace("\\", "/").rsplit("/", 1)[-1]
    served = (f"{_plural(int(mark.get('served_root') or 0), 'root turn')} and "
              f"{_plural(int(mark.get('served_sub') or 0), 'sub-call')} served from the journal at no cost")
    if mark.get("live", True):
        return f"Resumed from {name}: {served}; live from here"
    return f"Resumed from {name}: {served}; nothing went live"


def replayed_turn(mark: dict[str, Any] | None, turn: int) -> bool:
    """Whether a turn of a resumed run got its model reply from the journal (it sits before the mark)."""
    if mark is None:
        return False
    where = mark.get("turn")
    return where is None or turn < where or (turn == where and bool(mark.get("within")))


ASKED_AGAIN = {
    "empty_retried": "asked again: the model's reply was empty",
    "echo_retried": "asked again: the model's reply only copied the request",
    "repeat_reasked": "asked again: the model's reply would have run an earlier turn's code",
    "repeat_ended": "not run: the model's reply repeated an earlier turn after it was asked for another step; "
                    "the turns end here",
}
"""A turn's note for each way the loop asks the root again before running a reply, or ends the turns instead
(ModelReply.notes)."""


POLICY_ACTIONS = {
    "send_back": " sent the answer back",
    "ask_again": " asked again",
    "answer": " gave the run its answer",
    "end_turns": " ended the turns",
    "read_first": ": the sub-model read the inputs first",
    "note": " added a note",
}
"""What a turn-loop policy did, by PolicyActed.action, as the words after the policy's name in its note."""
EVIDENCE_POLICIES = frozenset({"unshown_value", "whole_copy"})
"""The policies `RLMConfig.evidence_check=False` removes: their send-backs say so beside the policies switch."""


def policy_note(policy: str, action: str, detail: str) -> tuple[str, str]:
    """A turn's note for one PolicyActed: ("rejected", ...) for a send-back, which also says how to turn the policy
    off (the user reads it where the answer went back), ("policy", ...) for every other action.

    The text is "<policy><what it did>: <detail>"; an action this version does not know is named as recorded."""
    did = POLICY_ACTIONS.get(action, f": {action}")
    text = f"{policy}{did}" + (f": {detail}" if detail else "")
    if action != "send_back":
        return "policy", text
    switch = f"leave '{policy}' out of RLM(..., policies=...)"
    if policy in EVIDENCE_POLICIES:
        switch += " or set evidence_check=False"
    return "rejected", f"{text} (to turn this check off: {switch})"


def turn_title(turn: int, max_turns: int | None) -> str:
    """A turn's heading; turn 0 holds what the harness did before the root's first step (the first reading)."""
    if turn == 0:
        return "Before turn 1: first reading"
    return f"Turn {turn}" + (f"/{max_turns}" if max_turns else "")


def fmt_rate(per_second: float) -> str:
    """Calls per second the way tqdm shows it: 17.2/s, or 4.1 s/call when slower than one a second."""
    if per_second <= 0:
        return "?"
    if per_second >= 1:
        return f"{per_second:,.1f}/s"
    return f"{1 / per_second:.1f} s/call"


_ENDED = {"interrupted": "interrupted", "error": "run failed", "budget_exhausted": "budget exhausted"}


def pending_turn_text(executed: bool, replied: bool, status: str, *, code: bool = True) -> str | None:
    """What a turn that has not run its code says, in the same words in every view (the extension's
    format.ts has the twin): waiting while the run goes on, cut short once it has ended. `code`: whether the
    reply holds code; a reply without any (a prose answer, an empty reply) has nothing left to run."""
    if executed or (replied and not code):
        return None
    if status in ("running", "waiting"):
        return "running…" if replied else "waiting for the model…"
    how = _ENDED.get(status, "run ended")
    return f"{how}: this code did not finish" if replied else f"{how} before the model replied"


def fmt_clock(s: float | None) -> str:
    """Seconds as tqdm prints them in its brackets: 00:07, 12:34, 1:02:03; "?" when unknown."""
    if s is None or s != s or s == float("inf"):
        return "?"
    minutes, secs = divmod(max(0, int(s)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def progress_text(done: int, total: int, elapsed: float, rate: float | None) -> str:
    """tqdm's progress figures: "20/60 [00:01<00:02, 14.0/s]" (replies in, calls in the batch, time spent,
    time left at the current rate, the rate); before the first reply the time left and rate are "?"."""
    left = (total - done) / rate if rate else None
    return f"{done:,}/{total:,} [{fmt_clock(elapsed)}<{fmt_clock(left)}, {fmt_rate(rate) if rate else '?/s'}]"


def fmt_secs(s: float | None) -> str:
    if s is None:
        return "?"
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 60:
        return f"{s:.1f} s"
    minutes, secs = divmod(int(round(s)), 60)
    return f"{minutes} min {secs:02d} s"


def more_label(page: int, left: int) -> str:
    """The label of a "show more" button: the next page of `left` items not shown yet."""
    return f"show the last {left:,}" if left <= page else f"show {page:,} more ({left:,} left)"


def left_out_marker(how: str) -> Callable[[int, int], str]:
    """The marker a view puts where it clipped text: a line saying how many characters were left out, and how."""
    return lambda omitted, _total: f"\n… [{omitted:,} characters {how}] …\n"


def clip(text: str, limit: int, *, left_out: str = "not shown") -> str:
    """Head and tail of a long text with a marker saying how much was left out (and how: `left_out`).

    Args:
        text: the text to show.
        limit: the characters kept (two thirds from the start, the rest from the end); the marker is extra.
        left_out: how the rest was left out, said in the marker ("not shown", "not recorded").

    Returns:
        `text` when it fits, else its head, the marker and its tail (`rlmnb._ground.text.clip`, both ends).
    """
    return clip_text(text, limit, keep="both", marker=left_out_marker(left_out), head=limit * 2 // 3)


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile of an already sorted list (None when empty)."""
    if not sorted_values:
        return None
    rank = max(0, min(len(sorted_values) - 1, math.ceil(q / 100 * len(sorted_values)) - 1))
    return sorted_values[rank]


SLOW_OVER_MEDIAN = 1.5  # a slow call takes at least this many times the median, whatever p95 says


def slow_cutoff(sorted_latencies: list[float]) -> float | None:
    """The latency above which a sub-call is slow: above p95 and above 1.5x the median, so calls that all took
    about the same time (2.0 s ±3 ms) have no slow one. None below 20 latencies: too few to say. The extension's
    `slowCutoff` (format.ts) is the same rule."""
    if len(sorted_latencies) < 20:
        return None
    p95, median = percentile(sorted_latencies, 95), percentile(sorted_latencies, 50)
    assert p95 is not None and median is not None
    return max(p95, SLOW_OVER_MEDIAN * median)


def running_time(latency_s: float | None, queued_s: float | None, cached: bool) -> float | None:
    """A finished sub-call's provider time, or None when it had none (served from the cache, or by an
    identical call in flight). Trajectories saved before `queued_s` existed keep their latency as recorded
    (queued time included), so they show as they did."""
    if latency_s is None or (queued_s is not None and cached):
        return None
    return float(latency_s)


def queue_text(g: dict[str, Any], sep: str = " · ") -> str:
    """A group's queue, apart from its latency: "4 in flight · 44 queued" while it runs ("4 cancelled · 44 not
    sent" once its run has ended), then "queued p50 1.0 s · p95 1.9 s" when calls waited for a slot ("" when
    nothing waited)."""
    parts = []
    if g["finished"] < g["started"]:
        flying, waiting = ("cancelled", "not sent") if g.get("ended") else ("in flight", "queued")
        parts.append(sep.join(f"{n:,} {word}" for n, word in ((g["in_flight"], flying), (g["queued"], waiting))
                              if n or word == flying))
    if g.get("queued_p95") is not None and g["queued_p95"] >= 0.001:
        parts.append(f"queued p50 {fmt_secs(g['queued_p50'])}{sep}p95 {fmt_secs(g['queued_p95'])}")
    return sep.join(parts)


def answer_text(answer: Any) -> str:
    if isinstance(answer, str):
        return answer
    try:
        return json.dumps(answer, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(answer)


QUOTE_NOTE = ("  quote ", "  more quotes")


def images_note(images: list[dict[str, Any]]) -> str:
    """A sub-call's images in a few words: "2 images (600x800 PNG, 1240x1754 PNG)"; "" for none."""
    if not images:
        return ""
    sizes = ", ".join(f"{i.get('width')}x{i.get('height')} {str(i.get('mime', '')).split('/')[-1].upper()}"
                      for i in images[:3]) + (", ..." if len(images) > 3 else "")
    return f"{len(images)} image{'s' if len(images) > 1 else ''} ({sizes})"


def quote_notes(details: dict[str, Any]) -> list[str]:
    """One line per quote a guard checked (QuotesFound): found, and where, or not found."""
    out = []
    for q in details.get("quotes") or []:
        text = clip(str(q.get("quote", "")), 120)
        if q.get("found"):
            out.append(f'  quote found: "{text}" ({q.get("where")})')
        else:
            where = f" ({q['where']})" if q.get("where") else ""
            out.append(f'  quote NOT found: "{text}"' + ("" if q.get("checked", True) else " (not checked)") + where)
    if details.get("skipped"):
        out.append(f"  more quotes not checked: {details['skipped']:,}")
    return out


def map_figures(m: dict[str, Any]) -> str:
    """An llm_map group's packing figures: items, packs, re-asks, failures."""
    items = m.get("items")
    text = f"{items:,} items" if isinstance(items, int) else "items streamed"
    text += f" · {m.get('packs', 0):,} packs · {m.get('reasks', 0):,} re-asked · {m.get('failures', 0):,} failed"
    return text + (f" · stopped: {m['stopped']}" if m.get("stopped") else "")
