"""Packing: many items into one numbered prompt, and the JSON reply back to answers per item.

A pack is filled until its estimated size reaches the token target or the item cap; an item larger
than the target goes alone (the host refuses it, without spending, when it exceeds the sub-model's
window). The reply must be a JSON list of {"id", "value"}; `parse_reply` is forgiving about fences,
prose around the list and ids given as strings, and strict about anything that could misalign answers
and items (unknown ids, the same id answered twice with different values).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from rlmnb._ground.prompts import render

CHARS_PER_TOKEN = 3.0  # conservative for JSON records and non-English text: packs stay under their target
ITEM_OVERHEAD = 8  # tokens of the <item id=..> wrapper and the item's share of the JSON reply


def estimate_tokens(text: str) -> int:
    return int(len(text) / CHARS_PER_TOKEN) + ITEM_OVERHEAD


def plan_packs(sizes: Sequence[int], target: int, cap: int, fixed: int = 0) -> list[list[int]]:
    """Positions grouped into packs of at most `cap` items and about `target` tokens (with `fixed` overhead)."""
    packs: list[list[int]] = []
    current: list[int] = []
    used = fixed
    for pos, size in enumerate(sizes):
        if current and (len(current) >= cap or used + size > target):
            packs.append(current)
            current, used = [], fixed
        current.append(pos)
        used += size
    if current:
        packs.append(current)
    return packs


def render_pack(instruction: str, output: str, texts: Sequence[str], retry: tuple[str, int] | None = None) -> str:
    """The prompt of one pack: the instruction once, then the items numbered from 1."""
    items = "\n".join(f"<item id={i}>\n{text}\n</item>" for i, text in enumerate(texts, 1))
    note = render("map_retry", reason=retry[0], attempt=retry[1]) if retry is not None else ""
    return render("map_pack", instruction=instruction.strip(), count=len(texts), output=output, retry=note,
                  items=items)


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def _loads(reply: str) -> Any:
    """The JSON in a reply: the whole text, a fenced block, or the outermost list in it."""
    text = reply.strip()
    candidates = [text]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(text)]
    if "[" in text and "]" in text:
        candidates.append(text[text.index("["): text.rindex("]") + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    raise ValueError("the reply was not JSON")


def _entries(data: Any) -> list[Any]:
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        for key in ("results", "answers", "items", "values", "data"):
            if isinstance(data.get(key), list):
                return list(data[key])
        if "id" in data and "value" in data:
            return [data]
        if data and all(str(k).strip().isdigit() for k in data):  # {"1": value, "2": value}
            return [{"id": k, "value": v} for k, v in data.items()]
    raise ValueError("the reply was not a JSON list of {\"id\", \"value\"} objects")


def _id(raw: Any) -> int | None:
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lstrip("#").isdigit():
        return int(raw.strip().lstrip("#"))
    return None


def parse_reply(reply: str, count: int) -> tuple[dict[int, Any], dict[int, str]]:
    """Answers by item number (1..count) and, for numbers without a usable answer, why.

    A pack of one also accepts a bare answer (the value alone), which models often give.
    """
    problems: dict[int, str] = {}
    try:
        data = _loads(reply)
        entries = _entries(data)
    except ValueError as exc:
        if count == 1 and reply.strip():
            try:
                bare = json.loads(reply.strip())
            except ValueError:
                bare = reply.strip()
            if not isinstance(bare, list | dict):
                return {1: bare}, {}
        reason = f"{exc}: {reply.strip()[:80]!r}" if reply.strip() else "the reply was empty"
        return {}, {i: reason for i in range(1, count + 1)}
    answers: dict[int, Any] = {}
    seen_twice: set[int] = set()
    for entry in entries:
        if not isinstance(entry, dict) or "value" not in entry:
            continue
        number = _id(entry.get("id"))
        if number is None or not 1 <= number <= count:
            continue
        if number in answers and answers[number] != entry["value"]:
            seen_twice.add(number)
        answers.setdefault(number, entry["value"])
    for number in seen_twice:
        del answers[number]
        problems[number] = "it was answered twice with different values"
    for number in range(1, count + 1):
        if number not in answers and number not in problems:
            problems[number] = "no answer was given for it"
    return answers, problems


__all__ = ["CHARS_PER_TOKEN", "ITEM_OVERHEAD", "estimate_tokens", "parse_reply", "plan_packs", "render_pack"]
