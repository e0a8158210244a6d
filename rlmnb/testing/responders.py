"""Deterministic sub-model behaviours: what a competent sub-model would answer, computed with code.

Each responder takes the OpenAI-style message list (or a prompt string) and returns the reply text,
so it can back a ScriptedLM or the fake server's sub-model.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from rlmnb.testing.generators import LABELS, label_of

__all__ = ["BUILTIN", "count_labels", "find_needle", "packed_labels", "packed_upper", "runbook_owner"]

_NEEDLE = re.compile(r"magic number is (\d{7})")


def _prompt(messages: Any) -> str:
    if isinstance(messages, str):
        return messages
    return str(messages[-1].get("content", "")) if messages else ""


def find_needle(messages: Any) -> str:
    """The 7-digit number after "magic number is" in the prompt, else NONE."""
    match = _NEEDLE.search(_prompt(messages))
    return match.group(1) if match else "NONE"


def count_labels(messages: Any) -> str:
    """JSON counts of ticket labels for prompts listing one ticket text per line (after a blank line)."""
    prompt = _prompt(messages)
    body = prompt.split("\n\n", 1)[1] if "\n\n" in prompt else prompt
    counts = Counter(label_of(line.strip()) for line in body.splitlines() if line.strip())
    counts.pop("unknown", None)
    return json.dumps({label: counts.get(label, 0) for label in LABELS})


BUILTIN = {"find_needle": find_needle, "count_labels": count_labels}


def runbook_owner(messages: Any) -> str:
    """The on-call owner the runbook names for the service asked about."""
    prompt = _prompt(messages)
    asked = re.search(r"owner for (\w+)", prompt)
    if not asked:
        return "UNKNOWN"
    owner = re.search(rf"owner for {re.escape(asked.group(1))}: ([^.\n]+)", prompt.split("\n\n", 1)[-1])
    return owner.group(1).strip() if owner else "UNKNOWN"


BUILTIN["runbook_owner"] = runbook_owner


def packed_upper(messages: Any) -> str:
    """llm_map's packed prompts answered with each item upper-cased (a plain prompt: its text upper-cased)."""
    from rlmnb.testing.packed import PackedResponder

    return PackedResponder(str.upper)(messages)


BUILTIN["packed_upper"] = packed_upper


def _ticket_label(item: str) -> str:
    if item.startswith("{"):
        try:
            record = json.loads(item)
        except ValueError:
            return "unknown"
        return label_of(str(record.get("text", ""))) if isinstance(record, dict) else "unknown"
    return label_of(item)


def packed_labels(messages: Any) -> str:
    """llm_classify's packed prompts over `labelled_table` tickets answered with each ticket's label.

    An item is a ticket text or a table row as a JSON record, read by its "text" field (what llm_classify
    sends for a table with more columns than the text).
    """
    from rlmnb.testing.packed import PackedResponder

    return PackedResponder(_ticket_label)(messages)


BUILTIN["packed_labels"] = packed_labels
