"""The HTML view of a run: script-free, inline-styled pieces and the whole collapsible tree.

Inline styles only, no scripts and no event handlers, so the HTML survives notebook sanitisers and
exported pages. The pieces (`header_html`, `meters_html`, `turn_html`, `group_summary_html`,
`call_html`, `answer_html`) are shared with the live widget; `render_html` draws a whole run tree.
The meters (turns, sub-calls, tokens, cost, time) draw a bar only against a limit that was set.
"""

from __future__ import annotations

import html
import time
from typing import Any

from rlmnb.events import Trajectory
from rlmnb.views._actions import block, copy_button, insert_button
from rlmnb.views._answer import answer_body_html
from rlmnb.views._fold import RunTree, as_tree
from rlmnb.views._format import (
    STATUS_LABELS,
    clip,
    fmt_cost,
    fmt_count,
    fmt_rate,
    fmt_secs,
    images_note,
    map_figures,
    pending_turn_text,
    progress_text,
    prompt_cache_text,
    queue_text,
    replayed_turn,
    resumed_text,
    turn_title,
)
from rlmnb.views._frames import frame_html, output_parts

__all__ = ["CALLS_SHOWN", "STATUS_COLORS", "answer_html", "call_html", "group_summary_html", "header_html",
           "highlight_python", "html_page", "mark_html", "meters_html", "render_html", "resumed_html", "running_batch",
           "sub_calls_text",
           "turn_html"]

CALLS_SHOWN = 20          # sub-calls listed per group in the static HTML (the JSON part has them all)
TEXT_CHARS = 20_000       # reply, code and output characters shown per turn
CALL_TEXT_CHARS = 2_000   # prompt and reply characters shown per sub-call

# JupyterLab's theme colours (the extension's view uses the same), light-theme values where there are none
BLUE, GREEN = "var(--jp-brand-color1,#1976d2)", "var(--jp-success-color1,#2e7d32)"
ORANGE, RED, GREY = "var(--jp-warn-color1,#ef6c00)", "var(--jp-error-color1,#c62828)", "var(--jp-ui-font-color2,#757575)"
STATUS_COLORS = {"running": BLUE, "submitted": GREEN, "fallback": ORANGE, "budget_exhausted": ORANGE,
                 "interrupted": GREY, "error": RED}


# ==================================================================================================
# HTML pieces (inline styles only: they survive notebook sanitisers; no scripts, no event handlers)

# The notebook's math renderer (MathJax 3 in JupyterLab and Notebook 7, MathJax 2 in nbconvert's HTML)
# would read "$0.25 ... $2" as TeX: every view's outer element carries both of its ignore classes.
MATH_SAFE = "tex2jax_ignore mathjax_ignore"

FONT = "font-family:var(--jp-ui-font-family,system-ui,-apple-system,'Segoe UI',sans-serif);font-size:13px;line-height:1.45"
PRE = ("margin:3px 0;padding:6px 8px;background:rgba(127,127,127,0.09);border-radius:4px;white-space:pre-wrap;"
       "word-break:break-word;font-family:var(--jp-code-font-family,ui-monospace,Menlo,Consolas,monospace);"
       "font-size:12px;line-height:1.4;max-height:28em;overflow:auto")
MUTED = "opacity:0.72"
SUMMARY = "cursor:pointer"
TURN_BOX = "border-left:3px solid rgba(127,127,127,0.35);padding:2px 0 2px 10px;margin:6px 0"
CHILD_BOX = "border-left:3px solid rgba(25,118,210,0.45);padding:2px 0 2px 10px;margin:6px 0 6px 4px"

_esc = html.escape


def _badge(status: str) -> str:
    color = STATUS_COLORS.get(status, GREY)
    label = STATUS_LABELS.get(status, status)
    return (f'<span style="display:inline-block;padding:0 7px;border-radius:9px;border:1px solid {color};'
            f'color:{color};font-size:12px">{_esc(label)}</span>')


def _chip(text: str, color: str) -> str:
    return f'<span style="color:{color};font-size:12px;margin-left:6px">{_esc(text)}</span>'


def _pre(text: str, style: str = "") -> str:
    return f'<pre style="{PRE};{style}">{_esc(text)}</pre>'


_lexer: Any = None

# Token colours follow the notebook's theme: JupyterLab's editor colour variables, with light-theme
# fallbacks where those variables do not exist (exported HTML, other front ends).
_TOKEN_COLOURS = (
    ("Comment", "comment", "#408080"), ("Keyword", "keyword", "#008000"), ("Operator.Word", "keyword", "#aa22ff"),
    ("Name.Builtin", "builtin", "#008000"), ("Name.Function", "def", "#0000ff"), ("Name.Class", "def", "#0000ff"),
    ("Literal.String", "string", "#ba2121"), ("Literal.Number", "number", "#080"), ("Operator", "operator", "#aa22ff"),
)


def _colour(token: Any) -> str | None:
    name = str(token).removeprefix("Token.")
    for prefix, var, fallback in _TOKEN_COLOURS:
        if name == prefix or name.startswith(prefix + "."):
            return f"var(--jp-mirror-editor-{var}-color,{fallback})"
    return None


def highlight_python(code: str) -> str:
    """Syntax-highlighted code as a <pre> with inline, theme-aware colours, or plain escaped text."""
    global _lexer
    try:
        if _lexer is None:
            from pygments.lexers import PythonLexer

            _lexer = PythonLexer()
        runs: list[tuple[str | None, str]] = []  # neighbouring tokens of one colour share a span
        for token, text in _lexer.get_tokens(code):
            colour = _colour(token)
            if runs and runs[-1][0] == colour:
                runs[-1] = (colour, runs[-1][1] + text)
            else:
                runs.append((colour, text))
        body = "".join(f'<span style="color:{c}">{_esc(t)}</span>' if c else _esc(t) for c, t in runs).rstrip("\n")
    except Exception:  # pygments missing or failing: plain text is still correct
        body = _esc(code)
    return f'<pre style="{PRE}">{body}</pre>'


def header_html(run: dict[str, Any], *, title: str = "RLM", inline: bool = False) -> str:
    """Title, status badge, models, elapsed time and the question (`inline`: on one line)."""
    models = _esc(run["model"] or "?")
    if run.get("sub_model") and run["sub_model"] != run["model"]:
        models += f' <span style="{MUTED}">→ sub</span> {_esc(run["sub_model"])}'
    label = run.get("label") or ""
    label = f' <span style="{MUTED}">{_esc(label)}</span>' if label and label != title else ""
    question = clip(run.get("question") or "", 400)
    setup = run.get("setup") or 0.0
    waited = (f' <span style="{MUTED}" title="from running the cell to the run\'s first step (loading the model '
              f'library, binding inputs)">(set-up {fmt_secs(setup)})</span>') if setup >= 0.5 else ""
    line = (f'<b>{_esc(title)}</b> {_badge(run["status"])}{label} <span style="margin-left:8px">{models}</span> '
            f'<span style="{MUTED};margin-left:8px">{fmt_secs(run["elapsed"])}</span>{waited}')
    if inline:  # one line, e.g. inside a <summary>
        short = clip(question, 160).replace("\n", " ")
        return f'<span style="{FONT}">{line} <span style="{MUTED}">— {_esc(short)}</span></span>'
    return (f'<div style="{FONT}"><div>{line}</div>'
            f'<div style="{MUTED};white-space:pre-wrap">{_esc(question)}</div></div>')


# ---- the budget meters, as tqdm shows progress: done, in flight, the cap; a bar only against a limit that
# was set (no empty grey bars); the same figures and words as the extension's metersView (view.ts)
_BAR = "height:5px;background:rgba(127,127,127,0.2);border-radius:3px;margin-top:2px;display:flex;overflow:hidden"
# calls out (in flight, queued) ahead of the replies: thin stripes, so a batch with every call out and no reply
# in (0/16) reads as empty and under way, never as full (the extension's .rlmnb-meter-ahead)
_AHEAD = "repeating-linear-gradient(135deg,var(--jp-brand-color1,#1976d2) 0 1.5px,transparent 1.5px 5px)"


def _limit(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None


def _meter(label: str, text: str, used: float, limit: float | None, ahead: float = 0.0, key: str = "") -> str:
    bar = ""
    if limit:
        done = max(0.0, min(1.0, used / limit))
        colour = "var(--jp-error-color1,#c62828)" if done >= 1 else "var(--jp-brand-color1,#1976d2)"
        bar = (f'<div class="rlmnb-meter-bar" style="{_BAR}"><div style="width:{done * 100:.1f}%;background:{colour}">'
               f'</div>')
        if ahead > 0:
            share = max(0.0, min(1.0 - done, ahead / limit))
            bar += f'<div class="rlmnb-meter-ahead" style="width:{share * 100:.1f}%;background:{_AHEAD}"></div>'
        bar += "</div>"
    return (f'<div class="rlmnb-meter" data-meter="{html.escape(key or label)}" '
            f'style="display:inline-block;min-width:150px;margin:2px 16px 2px 0;vertical-align:top"><div style="{MUTED};font-size:11px">{html.escape(label)}</div>'
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


def running_batch(tree: RunTree, now: float | None = None) -> dict[str, Any] | None:
    """The batch (an llm_query_batched or an llm_map) that started last among those still running, as the live
    header's progress meter reads it: its name and turn, replies in, its size, time spent, rate, calls out.
    None when no batch is running (the run has ended, or its sub-calls are single llm_query calls)."""
    for key, group in reversed(list(tree.groups.items())):
        if group.kind == "single" or group.done or group.finished >= max(group.size, len(group.call_ids)):
            continue  # cheap checks first: a finished batch of 50,000 calls is not summarised on every redraw
        view = tree.group_view(key, now=now)
        total = max(view["size"], view["started"])
        if view["kind"] == "single" or view["done"] or view["ended"] or view["finished"] >= total:
            continue
        if view["rate"]:
            elapsed = view["finished"] / view["rate"]
        else:  # no reply yet: the time since its first call
            first = tree.call_views(key, 0, 1)
            elapsed = ((now if now is not None else time.time()) - first[0]["started"]) if first else 0.0
        name = (view["map"] or {}).get("operator", "llm_map") if view["kind"] == "map" else "llm_query_batched"
        return {"name": f"{name} · turn {view['turn']}", "done": view["finished"], "total": total,
                "elapsed": max(0.0, elapsed), "rate": view["rate"], "in_flight": view["in_flight"]}
    return None


def meters_html(m: dict[str, Any], batch: dict[str, Any] | None = None) -> str:
    """Turns, sub-calls, tokens, cost and time of the whole run tree, each against its cap when one is set.
    With `batch` (`running_batch`), a meter before them shows the running batch as tqdm does, against its own
    size: the sub-calls meter stays the tree's count against the call budget."""
    max_turns, max_calls = _limit(m["max_turns"]), _limit(m["max_llm_calls"])
    max_tokens, max_cost, max_time = _limit(m["max_tokens"]), _limit(m["max_cost"]), _limit(m["max_time"])
    done, sent = int(m["sub_calls_done"]), int(m["sub_calls"])
    tokens = m["input_tokens"] + m["output_tokens"]
    progress = [_meter(batch["name"], progress_text(batch["done"], batch["total"], batch["elapsed"], batch["rate"]),
                       batch["done"], batch["total"], batch["in_flight"], key="batch")] if batch else []
    parts = [
        *progress,
        _meter("turns", f"{m['turns']:,}" + (f" / {int(max_turns):,}" if max_turns else ""), m["turns"], max_turns),
        _meter("sub-calls", sub_calls_text(m), done, max_calls, 0 if m.get("ended") else sent - done),
        _meter("tokens", f"{fmt_count(m['input_tokens'])} in"
               + (f" ({fmt_count(m['cached_input_tokens'])} cached)" if m.get("cached_input_tokens") else "")
               + f" · {fmt_count(m['output_tokens'])} out"
               + (f" / {fmt_count(max_tokens)}" if max_tokens else ""), tokens, max_tokens),
        _meter("cost", fmt_cost(m["cost"], m["unpriced"]) + (f" / ${max_cost:g}" if max_cost else "")
               + (f" · saved ${m['saved']:.4f}" if m.get("saved") else ""), m["cost"], max_cost),
        _meter("time", fmt_secs(m["elapsed"]) + (f" / {fmt_secs(max_time)}" if max_time else ""), m["elapsed"],
               max_time),
    ]
    return f'<div class="rlmnb-meters">{"".join(parts)}</div>'


def turn_html(t: dict[str, Any], *, status: str = "running", text_chars: int = TEXT_CHARS,
              actions: bool = False, replayed: bool = False) -> str:
    """One turn: title line, the reply (collapsed), the code, the output, notes (the caller draws the box).
    `status` is the run's: a turn that never ran its code reads differently once the run has ended.
    `actions` (the live widget): the code gets its "copy" and "copy code to a new cell" buttons.
    `replayed`: a resumed run's turn whose reply came from the journal (format.replayed_turn)."""
    usage = t["reply_usage"]
    bits = []
    if t["reply_latency"] is not None:
        bits.append(f"reply {fmt_secs(t['reply_latency'])}")
    if usage:
        cache = prompt_cache_text(usage.get("cached_input_tokens"), usage.get("saved_usd"))
        bits.append(f"{fmt_count(usage.get('input_tokens'))} → {fmt_count(usage.get('output_tokens'))} tokens"
                    + (f" ({cache})" if cache else ""))
    if t["duration"] is not None:
        bits.append(f"code {fmt_secs(t['duration'])}")
    chips = ""
    code = t["code"]
    if code is None and t["reply"] is not None:
        from rlmnb._engine.replies import extract_code

        code = extract_code(t["reply"]).code
    pending = pending_turn_text(t["executed"], t["reply"] is not None, status, code=code is not None)
    if pending:
        chips += _chip(pending, BLUE if status == "running" else GREY)
    if t["error"]:
        chips += _chip(t["error_type"] or "error", RED)
    if t["timed_out"]:
        chips += _chip("timed out", RED)
    if t["restarted"]:
        chips += _chip("sandbox restarted", ORANGE)
    if t["submitted"]:
        chips += _chip("submitted", GREEN)
    if replayed:
        chips += _chip("from the journal", GREY)
    out = [f'<div style="{FONT}"><div><b>{turn_title(t["turn"], t["max_turns"])}</b> '
           f'<span style="{MUTED}">{" · ".join(bits)}</span>{chips}</div>']
    if t["reply"] is not None:
        out.append(f'<details><summary style="{SUMMARY};{MUTED}">model reply ({len(t["reply"]):,} characters)'
                   f'</summary>{_pre(clip(t["reply"], text_chars))}</details>')
    if t.get("reasoning"):
        out.append(f'<details><summary style="{SUMMARY};{MUTED}">model reasoning ({len(t["reasoning"]):,} '
                   f'characters)</summary>{_pre(clip(t["reasoning"], text_chars))}</details>')
    if code is None and t["reply"] is not None:
        out.append(f'<div style="{MUTED}">(no code in this reply)</div>')
    if code is not None:  # a turn whose code has not run says so in its header (running…, did not finish)
        if actions:  # the label and buttons of the extension's view (extension/src/view.ts)
            insert = insert_button("copy code to a new cell", "insert a cell below with this turn's code")
            label = f'<div style="{MUTED};font-size:12px;margin-top:6px">code{copy_button("copy")}{insert}</div>'
            out.append(block(label, highlight_python(clip(code, text_chars))))
        else:
            out.append(highlight_python(clip(code, text_chars)))
    if t["executed"]:
        output = t["stdout"]
        if output:  # DataFrames the code printed as tables, the rest as text
            out.append(f'<div style="{MUTED};font-size:11px">output</div>')
            out.extend(_pre(clip(part, text_chars)) if kind == "text" else frame_html(part, pre_style=PRE, muted=MUTED)
                       for kind, part in output_parts(output, t.get("tables") or []))
        errors = "\n".join(s for s in (t["stderr"], t["error"] or "") if s)
        if errors:
            out.append(_pre(clip(errors, text_chars), f"color:{RED}"))
        if t.get("told"):  # a timed-out turn: what the model was told about it
            out.append(f'<div style="color:{ORANGE};font-size:12px">told the model: {_esc(t["told"])}</div>')
        elif not output and not errors:
            out.append(f'<div style="{MUTED};font-size:11px">(no output)</div>')
    elif t.get("streamed_stdout") or t.get("streamed_stderr"):  # printed while it runs, or before it was cut short
        label = "output so far" if status == "running" else "output before it stopped"
        out.append(f'<div style="{MUTED};font-size:11px" data-rlmnb-streamed="1">{label}</div>')
        if t["streamed_stdout"]:
            out.append(_pre(clip(t["streamed_stdout"], text_chars)))
        if t["streamed_stderr"]:
            out.append(_pre(clip(t["streamed_stderr"], text_chars), f"color:{RED}"))
    for kind, note in t["notes"]:
        color = ORANGE if kind == "rejected" else "inherit"
        out.append(f'<div style="color:{color};font-size:12px">{_esc(note)}</div>')
    out.append("</div>")
    return "".join(out)


def group_summary_html(g: dict[str, Any]) -> str:
    """One row for a batch (or a turn's single calls): replies in out of sent, with a rate and an ETA
    while it runs (as tqdm shows them), errors, retries, latency p50/p95, tokens, cost."""
    name = "llm_query_batched" if g["kind"] == "batch" else "llm_query"
    count = g["size"] if g["kind"] == "batch" else g["started"]
    parts = [f"<b>{name}</b> × {count:,}"]
    if g["kind"] == "map" and g.get("map"):
        parts = [f'<b>{_esc(g["map"].get("operator", "llm_map"))}</b> {_esc(map_figures(g["map"]))}',
                 f'{g["started"]:,} sub-calls']
    if g["finished"] < g["started"] or (g["kind"] == "batch" and not g["done"] and g["finished"] < count):
        parts.append(f'{g["finished"]:,} of {g["started"]:,} replied')
    if g.get("rate"):
        parts.append(f'{fmt_rate(g["rate"])} · ETA {fmt_secs(g["eta"])}')
    if g["errors"]:
        parts.append(f'<span style="color:{RED}">{g["errors"]:,} failed</span>')
    if g.get("retried"):
        rate = f' ({g["rate_limited"]:,} rate-limited)' if g.get("rate_limited") else ""
        parts.append(f'<span style="color:{ORANGE}">{g["retried"]:,} retried{rate}</span>')
    if g["p50"] is not None:
        parts.append(f'p50 {fmt_secs(g["p50"])} · p95 {fmt_secs(g["p95"])}')
    queue = queue_text(g)
    if queue:
        parts.append(queue)
    parts.append(f'{fmt_count(g["input_tokens"])} → {fmt_count(g["output_tokens"])} tokens')
    cache = prompt_cache_text(g.get("cached_input_tokens"), g.get("saved"))
    if cache:
        parts.append(f"prompt cache: {cache}")
    parts.append(fmt_cost(g["cost"], g["unpriced"]))
    journal = g.get("journal") or 0
    if g["cached"] - journal:
        parts.append(f'{g["cached"] - journal:,} cached')
    if journal:
        parts.append(f"{journal:,} from the journal")
    if g["wall"] is not None:
        parts.append(f'wall {fmt_secs(g["wall"])}')
    refused = f'<div style="color:{RED};font-size:12px">{_esc(g["refused"])}</div>' if g["refused"] else ""
    return f'<span style="{FONT}">{" · ".join(parts)}</span>{refused}'


def call_html(c: dict[str, Any], *, text_chars: int = CALL_TEXT_CHARS, actions: bool = False) -> str:
    """One sub-call, collapsed to a line; expands to its prompt, reply, tokens, latency and cost.
    `actions` (the live widget): prompt and reply get copy buttons (they copy what is shown)."""
    if not c["done"]:
        state = f'<span style="color:{BLUE}">running</span>'
    elif c["error"]:
        state = f'<span style="color:{RED}">failed</span>'
    else:
        state = "ok"
    reply = c["error"] if c["error"] else (c["reply"] or "")
    preview = reply.strip().replace("\n", " ")[:80]
    bits = [f"#{c['index']:,}", state]
    if c.get("waiting"):
        bits[1] = f'<span style="{MUTED}">queued</span>'  # still waiting for a concurrency slot
    if c["latency"] is not None:
        bits.append(fmt_secs(c["latency"]))
    elif c["done"] and c["cached"]:
        bits.append("no provider time")
    if c.get("queued") and c["queued"] >= 0.001:
        bits.append(f"queued {fmt_secs(c['queued'])}")
    if c.get("images"):
        thumbs = "".join(f'<img src="{_esc(str(i["thumb"]))}" alt="" style="height:28px;vertical-align:middle;'
                         f'margin-right:2px;border:1px solid #ccc">' for i in c["images"][:3]
                         if str(i.get("thumb", "")).startswith("data:image/png;base64,"))
        bits.append(thumbs + _esc(images_note(c["images"])))
    if c["input_tokens"] is not None:
        cache = prompt_cache_text(c.get("cached_input_tokens"), c.get("saved"))
        bits.append(f"{fmt_count(c['input_tokens'])} → {fmt_count(c['output_tokens'])} tokens"
                    + (f" ({cache})" if cache else ""))
    if c["done"]:
        bits.append("unpriced" if c["cost"] is None else fmt_cost(c["cost"]))
    if c.get("journal"):
        bits.append("from the journal")
    elif c["cached"]:
        bits.append("cached")
    if c.get("rate_limited"):
        bits.append(f'<span style="color:{ORANGE}">rate-limited ×{c["rate_limited"]}</span>')
    if c.get("retries"):
        bits.append(f'<span style="color:{ORANGE}">retried ×{c["retries"]}</span>')
    prompt = c["prompt"] or ""
    shown_chars = f"{c['prompt_chars']:,} characters" + ("" if len(prompt) >= c["prompt_chars"] else
                                                            f"; the record keeps {len(prompt):,} of them, "
                                                            f"its start and end")
    kind = "error" if c["error"] else "reply"
    prompt_pre, reply_pre = _pre(clip(prompt, text_chars)), _pre(clip(reply, text_chars), f"color:{RED}" if c["error"] else "")
    if actions:
        cut = len(prompt) > text_chars or len(prompt) < c["prompt_chars"]
        body = (block(f'<div style="{MUTED};font-size:11px">prompt ({shown_chars})'
                      f'{copy_button("copy prompt (as shown)" if cut else "copy prompt")}</div>', prompt_pre)
                + block(f'<div style="{MUTED};font-size:11px">{kind}'
                        f'{copy_button(("copy " + kind) + (" (as shown)" if len(reply) > text_chars else ""))}</div>',
                        reply_pre))
    else:
        body = (f'<div style="{MUTED};font-size:11px">prompt ({shown_chars})</div>{prompt_pre}'
                f'<div style="{MUTED};font-size:11px">{kind}</div>{reply_pre}')
    key = f' data-rlmnb-key="{_esc(str(c["call_id"]))}"' if actions else ""  # the extension keeps it open
    return (f'<details{key} style="{FONT};margin-left:8px"><summary style="{SUMMARY}">{" · ".join(bits)} '
            f'<span style="{MUTED}">{_esc(preview)}</span></summary>{body}</details>')


def resumed_html(mark: dict[str, Any]) -> str:
    """A resumed run's mark, a divider between what its journal served and what went live (the caller places
    it: RunTree.resumed_view says where)."""
    return (f'<div class="rlmnb-resumed" title="{_esc(str(mark.get("source") or ""))}" style="{FONT};'
            f'border-top:2px dashed {BLUE};color:{BLUE};font-size:12px;margin:8px 0 4px;padding-top:3px">'
            f'⟳ {_esc(resumed_text(mark))}</div>')


def answer_html(run: dict[str, Any]) -> str:
    """The box that closes a run's tree: the answer, or why there is none."""
    status = run["status"]
    if status == "running":
        return ""
    color = STATUS_COLORS.get(status, GREY)
    title = {"submitted": "Answer", "fallback": "Answer (fallback: no submit() before the turns ran out)",
             "budget_exhausted": "Budget exhausted", "interrupted": "Interrupted",
             "error": "Run failed"}.get(status, status)
    body = ""
    if run["has_answer"] and run["answer"] is not None:
        body += answer_body_html(run["answer"], pre_style=PRE)
    if status not in ("submitted",) and (run["error"] or run["reason"]):
        body += f'<div style="font-size:12px">{_esc(run["error"] or run["reason"])}</div>'
    if status == "interrupted":
        body += f'<div style="{MUTED};font-size:12px">The partial trajectory above is kept.</div>'
    for note in run["notes"]:
        body += f'<div style="{MUTED};font-size:12px">{_esc(note)}</div>'
    return (f'<div style="{FONT};border:1px solid {color};border-radius:5px;padding:6px 10px;margin:8px 0 2px">'
            f'<b style="color:{color}">{_esc(title)}</b>{body}</div>')



def render_html(trajectory: Trajectory | RunTree, *, full_page: bool = False, calls_shown: int = CALLS_SHOWN,
                title: str = "RLM") -> str:
    """A script-free HTML tree of a run (collapsible <details>); `full_page` wraps it in a document.

    Args:
        trajectory: a Trajectory (or an already built RunTree).
        full_page: return a standalone `<!doctype html>` page instead of a fragment.
        calls_shown: sub-calls listed per group (default 20); the rest are counted, not shown.
    """
    tree = as_tree(trajectory)
    root = tree.run_view()
    parts = [f'<div class="rlmnb-trajectory {MATH_SAFE}" style="{FONT}">', header_html(root, title=title),
             meters_html(tree.meters_view())]
    if root["run_id"] is not None:
        parts.append(_run_body_html(tree, root["run_id"], calls_shown))
        parts.append(answer_html(root))
    parts.append("</div>")
    fragment = "".join(parts)
    if not full_page:
        return fragment
    question = clip(root.get("question") or "", 80).replace("\n", " ")
    return html_page(fragment, f"{title}: {question}")


# JupyterLab's theme variables, which every view's colours read, for pages outside JupyterLab: the light theme's
# values, and the dark theme's when the reader's system is dark (code colours included: no light syntax colours
# on a dark ground)
_LIGHT = ("--jp-ui-font-color0:#000;--jp-ui-font-color1:rgba(0,0,0,0.87);--jp-ui-font-color2:rgba(0,0,0,0.54);"
          "--jp-ui-font-color3:rgba(0,0,0,0.38);--jp-layout-color0:#fff;--jp-layout-color1:#fff;"
          "--jp-layout-color2:#eee;--jp-layout-color3:#bdbdbd;--jp-border-color1:#bdbdbd;--jp-border-color2:#e0e0e0;"
          "--jp-brand-color1:#1976d2;--jp-brand-color2:#64b5f6;--jp-brand-color3:#bbdefb;--jp-success-color1:#388e3c;"
          "--jp-warn-color1:#f57c00;--jp-error-color1:#d32f2f;--jp-cell-editor-background:#f5f5f5;"
          "--jp-input-background:#fff;--jp-rendermime-table-row-background:#f5f5f5;"
          "--jp-rendermime-table-row-hover-background:#e1f5fe;--jp-mirror-editor-keyword-color:#008000;"
          "--jp-mirror-editor-builtin-color:#008000;--jp-mirror-editor-def-color:#0000ff;"
          "--jp-mirror-editor-string-color:#ba2121;--jp-mirror-editor-number-color:#080;"
          "--jp-mirror-editor-operator-color:#aa22ff;--jp-mirror-editor-comment-color:#408080")
_DARK = ("--jp-ui-font-color0:#fff;--jp-ui-font-color1:rgba(255,255,255,0.87);--jp-ui-font-color2:rgba(255,255,255,0.6);"
         "--jp-ui-font-color3:rgba(255,255,255,0.4);--jp-layout-color0:#111;--jp-layout-color1:#212121;"
         "--jp-layout-color2:#424242;--jp-layout-color3:#616161;--jp-border-color1:#616161;--jp-border-color2:#424242;"
         "--jp-brand-color1:#42a5f5;--jp-brand-color2:#1976d2;--jp-brand-color3:#0d47a1;--jp-success-color1:#66bb6a;"
         "--jp-warn-color1:#ffa726;--jp-error-color1:#ef5350;--jp-cell-editor-background:#2b2b2b;"
         "--jp-input-background:#2b2b2b;--jp-rendermime-table-row-background:rgba(255,255,255,0.06);"
         "--jp-rendermime-table-row-hover-background:rgba(66,165,245,0.2);--jp-mirror-editor-keyword-color:#81c784;"
         "--jp-mirror-editor-builtin-color:#81c784;--jp-mirror-editor-def-color:#64b5f6;"
         "--jp-mirror-editor-string-color:#ff8a80;--jp-mirror-editor-number-color:#a5d6a7;"
         "--jp-mirror-editor-operator-color:#ce93d8;--jp-mirror-editor-comment-color:#80cbc4")
_FONTS = ("--jp-ui-font-family:system-ui,-apple-system,'Segoe UI',sans-serif;"
          "--jp-code-font-family:ui-monospace,Menlo,Consolas,'DejaVu Sans Mono',monospace")
PAGE_THEME = (f":root{{{_LIGHT};{_FONTS};color-scheme:light dark}}@media (prefers-color-scheme: dark){{:root{{{_DARK}}}}}"
              "body{background:var(--jp-layout-color0);color:var(--jp-ui-font-color1);"
              "font-family:var(--jp-ui-font-family)}button,input,select{font-family:inherit}")


def html_page(body: str, title: str, *, style: str = "", script: str = "") -> str:
    """A standalone page around view fragments, light or dark as the reader's system is (`PAGE_THEME`);
    `style` and `script` go in whole (the exported viewer's, `views._page`)."""
    run = f"<script>{script}</script>" if script else ""
    return ("<!doctype html>\n<html><head><meta charset=\"utf-8\">"
            f"<title>{_esc(title)}</title>"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<style>{PAGE_THEME}body{{max-width:1100px;margin:24px auto;padding:0 16px}}{style}</style>"
            f"</head><body>{body}{run}</body></html>\n")


def _run_body_html(tree: RunTree, run_id: str, calls_shown: int) -> str:
    parts = []
    status = tree.run_view(run_id)["status"]
    mark = tree.resumed_view(run_id)
    for number in tree.turn_numbers(run_id):
        turn = turn_html(tree.turn_view(run_id, number), status=status, replayed=replayed_turn(mark, number))
        parts.append(f'{mark_html(mark, number, False)}<div style="{TURN_BOX}">{turn}{mark_html(mark, number, True)}')
        for kind, key in tree.turn_items(run_id, number):
            parts.append(_group_static_html(tree, key, calls_shown) if kind == "group"
                         else _child_static_html(tree, key, calls_shown))
        parts.append("</div>")
    parts.append(mark_html(mark, None, False))
    return "".join(parts)


def mark_html(mark: dict[str, Any] | None, turn: int | None, within: bool) -> str:
    """The resumed run's mark if it sits here: before turn `turn` (`within` False), inside it after its
    reply (`within` True), or after the last turn (`turn` None); else ""."""
    if mark is None or mark["turn"] != turn or (turn is not None and bool(mark["within"]) != within):
        return ""
    return resumed_html(mark)


def _group_static_html(tree: RunTree, key: str, calls_shown: int) -> str:
    view = tree.group_view(key)
    calls = tree.call_views(key, 0, calls_shown)
    more = view["started"] - len(calls)
    rest = (f'<div style="{MUTED};font-size:12px;margin-left:8px">… {more:,} more calls not listed here '
            f'(the trajectory JSON has them all)</div>') if more > 0 else ""
    return (f'<details style="{FONT};margin:2px 0"><summary style="{SUMMARY}">{group_summary_html(view)}</summary>'
            f'{"".join(call_html(c) for c in calls)}{rest}</details>')


def _child_static_html(tree: RunTree, run_id: str, calls_shown: int) -> str:
    run = tree.run_view(run_id)
    return (f'<details open style="{CHILD_BOX}"><summary style="{SUMMARY}">'
            f'{header_html(run, title="child run", inline=True)}'
            f'</summary>{_run_body_html(tree, run_id, calls_shown)}{answer_html(run)}</details>')
