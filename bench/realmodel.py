"""rlmnb against a real small model: how the harness copes with replies as a real model writes them.

Three small tasks of known answers run in the kernel sandbox against the local OpenAI-compatible
server of `../shared/realmodel/` (Qwen2.5-Coder 1.5B on llama.cpp, one request at a time):

- needle: the 7-digit magic number in a ~40,000-character text;
- billing: how many tickets of a 2,000-row table have the category "billing";
- refunds: which area's tickets mention refunds most often.

Per run it prints the status, whether the answer is right, turns, sub-calls and wall time, and the
harness events, each as "seen/handled": invented output blocks in replies / removed, replies cut at
max_tokens / reported, empty replies / retried, repeated code with the same output / flagged.
"Seen" is counted by this script from the raw replies and code; "handled" from what the harness
recorded (zero on a harness that does not handle it). Trajectories are saved for reading.

Run: python bench/realmodel.py [--out /tmp/realmodel-after] [--tasks needle,billing,refunds] [--policies all]
     (the server must be running: bash ../shared/realmodel/serve.sh start; ~10-15 minutes)
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import sys
import time
import tokenize
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlmnb import PROFILES, RLM, ConfigError, RLMConfig
from rlmnb.events import CodeExecuted, ModelReply
from rlmnb.testing.generators import haystack

URL = f"http://127.0.0.1:{os.environ.get('RLMNB_REALMODEL_PORT', '8899')}/v1"
ROOT_MAX_TOKENS = 400
MODEL_SETTINGS: dict[str, Any] = {"api_base": URL, "api_key": "none", "temperature": 0, "timeout": 600,
                                  "context_window": 16384, "input_cost_per_token": 0, "output_cost_per_token": 0}
AREAS = ("north", "south", "east", "west")
CATEGORIES = ("billing", "shipping", "account", "technical")
PHRASES = {
    "billing": ("I was charged twice this month", "my invoice shows the wrong amount", "please fix my bill"),
    "shipping": ("the parcel has not arrived", "delivery was late again", "the box came damaged"),
    "account": ("I cannot log in", "please reset my password", "my profile settings are gone"),
    "technical": ("the app crashes on start", "the page shows an error", "sync stopped working"),
}
OUTPUT_FENCE = re.compile(r"^\s*(`{3,}|~{3,})[ \t]*(output|text|stdout|console|result|out)\b", re.MULTILINE | re.I)


def server_up() -> bool:
    try:
        with urllib.request.urlopen(URL + "/models", timeout=5) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def tickets(rows: int = 2_000, seed: int = 3) -> tuple[pd.DataFrame, int, str]:
    """A ticket table; the true billing count and the area whose tickets mention refunds most."""
    rng = np.random.default_rng(seed)
    area = rng.choice(AREAS, rows, p=[0.2, 0.3, 0.25, 0.25])
    category = rng.choice(CATEGORIES, rows, p=[0.3, 0.25, 0.25, 0.2])
    refund_rate = {"north": 0.05, "south": 0.08, "east": 0.3, "west": 0.1}
    texts = []
    for a, c in zip(area, category, strict=True):
        text = str(rng.choice(PHRASES[str(c)]))
        if rng.random() < refund_rate[str(a)]:
            text += ", and I would like a refund"
        texts.append(text)
    frame = pd.DataFrame({"ticket_id": np.arange(1, rows + 1), "area": area, "category": category, "text": texts})
    mentions = frame[frame.text.str.contains("refund")].groupby("area").size()
    return frame, int((frame.category == "billing").sum()), str(mentions.idxmax())


def tasks() -> dict[str, dict[str, Any]]:
    hay = haystack(40_000, seed=11)
    frame, billing, refund_area = tickets()
    return {
        "needle": {"question": "What is the magic number hidden in the text? Answer with the number only.",
                   "inputs": {"text": hay.text}, "right": lambda a: hay.needle in str(a)},
        "billing": {"question": "How many tickets have the category 'billing'? Answer with a number.",
                    "inputs": {"tickets": frame}, "right": lambda a: re.search(rf"\b{billing}\b", str(a)) is not None},
        "refunds": {"question": "Which area's tickets mention refunds most often? Answer with the area name.",
                    "inputs": {"tickets": frame},
                    "right": lambda a: set(re.findall(r"\b(north|south|east|west)\b", str(a).lower())) == {refund_area}},
    }


def _normal(code: str) -> str:
    try:
        parts = [t.string for t in tokenize.generate_tokens(io.StringIO(code).readline)
                 if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                                   tokenize.DEDENT, tokenize.ENDMARKER)]
        return " ".join(parts)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return " ".join(code.split())


def _unclosed_fence(text: str) -> bool:
    return len(re.findall(r"^\s*```", text, re.MULTILINE)) % 2 == 1


def harness_events(events: list[Any], max_tokens: int = ROOT_MAX_TOKENS) -> dict[str, tuple[int, int]]:
    replies = [e for e in events if isinstance(e, ModelReply) and e.purpose == "turn"]
    notes = [list(getattr(e, "notes", []) or []) for e in replies]
    codes = [e for e in events if isinstance(e, CodeExecuted)]
    invented_seen = sum(len(OUTPUT_FENCE.findall(e.text)) for e in replies)
    invented_done = sum(int(n.split(":", 1)[1]) for ns in notes for n in ns if n.startswith("outputs_removed:"))
    cut_seen = sum(1 for e in replies if getattr(e, "finish_reason", None) == "length"
                   or (e.usage.get("output_tokens", 0) >= max_tokens - 1 and _unclosed_fence(e.text)))
    cut_done = sum(1 for ns in notes if "cut" in ns)
    empty_seen = sum(1 for e in replies if not e.text.strip())
    empty_done = sum(1 for ns in notes if "empty_retried" in ns)
    seen: dict[tuple[str, str], int] = {}
    repeat_seen = 0
    for e in codes:
        key = (_normal(e.code), e.stdout)
        repeat_seen += key in seen
        seen[key] = e.turn
    repeat_done = sum(1 for e in codes if getattr(e, "repeat_of", None))
    return {"invented": (invented_seen, invented_done), "cut": (cut_seen, cut_done),
            "empty": (empty_seen, empty_done), "repeats": (repeat_seen, repeat_done)}


def run_task(name: str, spec: dict[str, Any], out: Path, args: argparse.Namespace) -> dict[str, Any]:
    from rlmnb._models.litellm import LiteLLM

    root = LiteLLM("openai/local", max_tokens=args.max_tokens, **MODEL_SETTINGS)
    sub = LiteLLM("openai/local", max_tokens=120, **MODEL_SETTINGS)
    rlm = RLM(root, sub, sandbox="kernel", max_iterations=args.turns, max_llm_calls=12, max_time=args.max_time,
              cache=False, policies=args.policies)
    started = time.perf_counter()
    result = rlm.run(spec["question"], **spec["inputs"])
    wall = time.perf_counter() - started
    result.save(out / f"{name}.json")
    events = result.trajectory.events
    turns = sum(1 for e in events if isinstance(e, ModelReply) and e.purpose == "turn")
    row = {"task": name, "status": result.status, "right": bool(spec["right"](result.answer)),
           "turns": turns, "sub_calls": result.usage.sub_calls, "wall_s": round(wall, 1),
           "answer": str(result.answer)[:60], **harness_events(events, args.max_tokens)}
    print(json.dumps(row, default=str), flush=True)
    return row


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| task | status | right | turns | sub-calls | wall s | invented outputs seen/removed "
            "| cut seen/reported | empty seen/retried | repeats seen/flagged | answer |")
    lines = [head, "|" + " --- |" * 11]
    for r in rows:
        pair = {k: f"{r[k][0]}/{r[k][1]}" for k in ("invented", "cut", "empty", "repeats")}
        lines.append(f"| {r['task']} | {r['status']} | {'yes' if r['right'] else 'no'} | {r['turns']} | "
                     f"{r['sub_calls']} | {r['wall_s']} | {pair['invented']} | {pair['cut']} | {pair['empty']} | "
                     f"{pair['repeats']} | {r['answer']!r} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--out", default="/tmp/realmodel-bench", help="folder for the saved trajectories")
    parser.add_argument("--tasks", default="needle,billing,refunds")
    parser.add_argument("--turns", type=int, default=4, help="max_iterations per run")
    parser.add_argument("--max-time", type=float, default=300.0, help="max_time per run, seconds")
    parser.add_argument("--max-tokens", type=int, default=ROOT_MAX_TOKENS, help="max_tokens of a root reply")
    parser.add_argument("--policies", default="auto",
                        help=f"a profile ({', '.join(['auto', *PROFILES])}), 'all', or policy names with commas")
    args = parser.parse_args(argv)
    try:
        RLMConfig(policies=args.policies).validate()
    except ConfigError as exc:
        parser.error(str(exc))
    if not server_up():
        print(f"no model server at {URL}: start it with bash ../shared/realmodel/serve.sh start", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    all_tasks = tasks()
    rows = [run_task(name, all_tasks[name], out, args) for name in args.tasks.split(",")]
    print()
    print(table(rows))
    (out / "table.md").write_text(table(rows) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
