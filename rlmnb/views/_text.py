"""The text views of a run: one stable summary line, and a readable terminal tree (`rlmnb view`).

The summary line carries no times and no ids, so it is the `text/plain` of a saved notebook that
nbval compares; the terminal tree is what the CLI prints.
"""

from __future__ import annotations

from typing import Any

from rlmnb.events import Trajectory
from rlmnb.views._fold import RunTree, as_tree
from rlmnb.views._format import (
    QUOTE_NOTE,
    STATUS_LABELS,
    answer_text,
    clip,
    fmt_cost,
    fmt_count,
    fmt_secs,
    images_note,
    map_figures,
    prompt_cache_text,
    queue_text,
    replayed_turn,
    resumed_text,
    turn_title,
)

__all__ = ["render_text", "summary_line"]


def summary_line(trajectory: Trajectory | RunTree) -> str:
    """One stable line (no times, no ids): status, turns, sub-calls, tokens, answer."""
    tree = as_tree(trajectory)
    run = tree.run_view()
    m = tree.meters_view()
    if run["run_id"] is None:
        return "RLM run (no events yet)"
    text = (f"RLM run · {STATUS_LABELS.get(run['status'], run['status'])} · {m['turns']} turn(s) · "
            f"{m['sub_calls']:,} sub-call(s) · {m['input_tokens']:,} → {m['output_tokens']:,} tokens · "
            f"{fmt_cost(m['cost'], m['unpriced'])}")
    mark = tree.resumed_view()
    if mark is not None:
        text += (f" · resumed: {mark['served_root']:,} root turn(s) and {mark['served_sub']:,} sub-call(s) "
                 f"from the journal")
    if run["has_answer"] and run["answer"] is not None:
        answer = answer_text(run["answer"]).replace("\n", " ")
        text += f" · answer: {answer[:200] + '…' if len(answer) > 200 else answer}"
    elif run["status"] in ("error", "interrupted", "budget_exhausted") and (run["error"] or run["reason"]):
        text += f" · {run['error'] or run['reason']}"
    return text


def render_text(trajectory: Trajectory | RunTree, *, width: int = 100, calls_shown: int = 3,
                text_chars: int = 2_000) -> str:
    """A readable terminal view: header, budget, each turn's code, output and sub-calls, the answer.

    Args:
        width: line width of the rules between turns (default 100).
        calls_shown: sub-calls shown per group with their prompt and reply heads (default 3).
        text_chars: characters of each code, output and reply shown (default 2,000).
    """
    tree = as_tree(trajectory)
    root = tree.run_view()
    if root["run_id"] is None:
        return "RLM run (no events yet)\n"
    lines: list[str] = []
    m = tree.meters_view()
    models = root["model"] + (f" (sub-calls: {root['sub_model']})" if root["sub_model"] != root["model"] else "")
    lines.append(f"RLM run · {STATUS_LABELS.get(root['status'], root['status'])} · {models} · "
                 f"{fmt_secs(root['elapsed'])}")
    lines.append(f"Question: {clip(root['question'], 1_000)}")

    def limit(value: Any) -> str:
        return f"/{value:,}" if isinstance(value, int) and value else ""

    budget = (f"Budget: turns {m['turns']}{limit(m['max_turns'])} · sub-calls {m['sub_calls']:,}"
              f"{limit(m['max_llm_calls'])}")
    if m["sub_errors"]:
        budget += f" ({m['sub_errors']:,} failed)"
    cache = prompt_cache_text(m["cached_input_tokens"], m["saved"])
    budget += (f" · tokens {fmt_count(m['input_tokens'])} in" + (f" ({cache})" if cache else "")
               + f" / {fmt_count(m['output_tokens'])} out"
               f" · cost {fmt_cost(m['cost'], m['unpriced'])}"
               + (f" of ${m['max_cost']:g}" if m["max_cost"] else "")
               + f" · time {fmt_secs(m['elapsed'])}" + (f" of {fmt_secs(m['max_time'])}" if m["max_time"] else ""))
    lines.append(budget)
    _run_text(tree, root["run_id"], lines, "", width, calls_shown, text_chars)
    lines.append("=" * width)
    lines.extend(_answer_text(root, ""))
    return "\n".join(lines) + "\n"


def _indent(text: str, prefix: str) -> list[str]:
    return [prefix + line for line in text.rstrip("\n").split("\n")]


def _mark_lines(mark: dict[str, Any] | None, turn: int | None, within: bool, pad: str) -> list[str]:
    """The resumed run's mark if it sits here (see _html.mark_html for the places)."""
    if mark is None or mark["turn"] != turn or (turn is not None and bool(mark["within"]) != within):
        return []
    return [f"{pad}⟳ {resumed_text(mark, full_path=True)}"]


def _run_text(tree: RunTree, run_id: str, lines: list[str], pad: str, width: int, calls_shown: int,
              text_chars: int) -> None:
    mark = tree.resumed_view(run_id)
    for number in tree.turn_numbers(run_id):
        t = tree.turn_view(run_id, number)
        lines.extend(_mark_lines(mark, number, False, pad))
        title = f"── {turn_title(number, t['max_turns'])} "
        flags = [f for f, on in (("error", bool(t["error"])), ("timed out", t["timed_out"]),
                                 ("submitted", t["submitted"]), ("from the journal", replayed_turn(mark, number)))
                 if on]
        if flags:
            title += "(" + ", ".join(flags) + ") "
        lines.append(pad + title + "─" * max(0, width - len(pad) - len(title)))
        code = t["code"]
        if code is None and t["reply"] is not None:
            from rlmnb._engine.replies import extract_code

            code = extract_code(t["reply"]).code
        if code is None and t["reply"] is not None:
            lines.append(pad + "  reply (no code):")
            lines.extend(_indent(clip(t["reply"], text_chars), pad + "    "))
        elif code is not None:
            lines.append(pad + "  code:")
            lines.extend(_indent(clip(code, text_chars), pad + "    "))
        if t["executed"]:
            output = "\n".join(s for s in (t["stdout"], t["stderr"], t["error"] or "") if s)
            lines.append(pad + "  output:" + ("" if output else " (none)"))
            if output:
                lines.extend(_indent(clip(output, text_chars), pad + "    "))
            if t["told"]:
                lines.append(pad + "  told the model: " + t["told"].replace("\n", " "))
        elif t["streamed_stdout"] or t["streamed_stderr"]:
            lines.append(pad + "  output so far:")
            lines.extend(_indent(clip(t["streamed_stdout"] + t["streamed_stderr"], text_chars), pad + "    "))
        for _kind, note in t["notes"]:
            lines.append(pad + "  note: " + note.replace("\n", " "))
        lines.extend(_mark_lines(mark, number, True, pad + "  "))
        for kind, key in tree.turn_items(run_id, number):
            if kind == "group":
                g = tree.group_view(key)
                lines.append(pad + "  sub-calls: " + _group_text(g))
                for c in tree.call_views(key, 0, calls_shown):
                    reply = (c["error"] or c["reply"] or "").strip().replace("\n", " ")
                    prompt = (c["prompt"] or "").strip().replace("\n", " ")
                    seen = f" + {images_note(c['images'])}" if c.get("images") else ""
                    lines.append(f"{pad}    #{c['index']}: {prompt[:60]!r}{seen} -> {reply[:60]!r}")
                if g["started"] > calls_shown:
                    lines.append(f"{pad}    … {g['started'] - calls_shown:,} more")
            else:
                child = tree.run_view(key)
                lines.append(f"{pad}  child run: {clip(child['question'], 200)!r} "
                             f"[{STATUS_LABELS.get(child['status'], child['status'])}]")
                _run_text(tree, key, lines, pad + "    ", width, calls_shown, text_chars)
                lines.extend(_answer_text(child, pad + "    "))
    lines.extend(_mark_lines(mark, None, False, pad))


def _group_text(g: dict[str, Any]) -> str:
    name = "llm_query_batched" if g["kind"] == "batch" else "llm_query"
    count = g["size"] if g["kind"] == "batch" else g["started"]
    text = f"{name} × {count:,}"
    if g["kind"] == "map" and g.get("map"):
        text = f"{g['map'].get('operator', 'llm_map')}: {map_figures(g['map'])}, {g['started']:,} sub-calls"
    if g["errors"]:
        text += f", {g['errors']:,} failed"
    if g["p50"] is not None:
        text += f", p50 {fmt_secs(g['p50'])} / p95 {fmt_secs(g['p95'])}"
    queue = queue_text(g, " / ")
    if queue:
        text += f", {queue}"
    text += f", {fmt_count(g['input_tokens'])} in / {fmt_count(g['output_tokens'])} out tokens"
    cache = prompt_cache_text(g.get("cached_input_tokens"), g.get("saved"))
    text += f" (prompt cache: {cache})" if cache else ""
    text += f", {fmt_cost(g['cost'], g['unpriced'])}"
    if g.get("journal"):
        text += f", {g['journal']:,} from the journal"
    if g["refused"]:
        text += f" (refused: {g['refused']})"
    return text


def _answer_text(run: dict[str, Any], pad: str) -> list[str]:
    status = run["status"]
    if status == "running":
        return [pad + "(still running)"]
    label = {"submitted": "Answer", "fallback": "Answer (fallback)"}.get(status)
    lines = []
    if label and run["answer"] is not None:
        text = answer_text(run["answer"])
        if "\n" in text:
            lines.append(f"{pad}{label}:")
            lines.extend(_indent(text, pad + "  "))
        else:
            lines.append(f"{pad}{label}: {text}")
    else:
        lines.append(f"{pad}{STATUS_LABELS.get(status, status).capitalize()}: "
                     f"{run['error'] or run['reason'] or 'no answer'}")
    lines.extend(pad + note for note in run["notes"] if note.startswith(QUOTE_NOTE))  # QuotesFound's findings
    return lines
