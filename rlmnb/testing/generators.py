"""Seeded data generators for tests, notebooks, demos and benchmarks. Nothing generated is committed.

- `haystack`: a large text with one hidden fact ("The magic number is 1234567.").
- `labelled_table`: an OOLONG-style table (user, date, free text whose label is hidden in the wording).
- `log_folder`: a folder of logs, markdown, JSON lines, CSV and Parquet files.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["GENERATED_AT", "LABELS", "WORDS", "Haystack", "haystack", "label_of", "labelled_table", "log_folder"]

GENERATED_AT = 1_740_787_200  # 2025-03-01 00:00 UTC: the modification time of every generated file

WORDS = ["data", "system", "report", "value", "market", "policy", "service", "customer", "account", "network", "signal", "model", "review", "quarter", "budget", "process", "record", "update", "request", "result", "support", "team", "order", "delivery", "invoice", "contract", "region", "product", "feature", "release", "schedule", "meeting", "project", "status", "office", "travel", "weather", "river", "garden", "window", "paper", "music", "city", "forest", "ocean", "mountain", "engine", "station", "library", "kitchen", "village", "harbour", "field"]


@dataclass(frozen=True)
class Haystack:
    text: str
    needle: str
    position: int

    def __repr__(self) -> str:
        return f"Haystack({len(self.text):,} chars, needle {self.needle!r} at {self.position:,})"


def haystack(size_chars: int = 1_000_000, *, needle: str | None = None, seed: int = 0,
             position: float = 0.61) -> Haystack:
    """Filler sentences of random words with one magic-number sentence at `position` (0..1)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    secret = needle or str(int(rng.integers(1_000_000, 9_999_999)))
    pool_size = 4096
    lengths = rng.integers(6, 16, size=pool_size)
    words = np.array(WORDS)
    pool = []
    for n in lengths:
        sentence = " ".join(words[rng.integers(0, len(words), size=n)])
        pool.append(sentence[0].upper() + sentence[1:] + ".")
    avg = sum(len(s) + 1 for s in pool) / pool_size
    count = int(size_chars / avg) + 8
    picks = rng.integers(0, pool_size, size=count)
    body = " ".join(pool[i] for i in picks)[: max(0, size_chars - 40)]
    fact = f" The magic number is {secret}. "
    at = int(len(body) * position)
    at = body.rfind(" ", 0, at) if at > 0 else 0
    text = body[:max(at, 0)] + fact + body[max(at, 0):]
    return Haystack(text=text, needle=secret, position=max(at, 0) + 1)


LABELS = ("billing", "shipping", "technical", "account", "praise")
_TEMPLATES: dict[str, tuple[str, ...]] = {
    "billing": ("I was charged twice for order {n}.", "The invoice {n} shows the wrong amount.",
                "Why did my card get billed {n} dollars extra?", "Refund for payment {n} never arrived."),
    "shipping": ("Parcel {n} is still not delivered.", "The courier lost package {n}.",
                 "Delivery {n} arrived damaged and late.", "Tracking for shipment {n} stopped updating."),
    "technical": ("The app crashes when I open screen {n}.", "Error code {n} appears on login.",
                  "Sync fails with timeout after {n} seconds.", "The export button throws exception {n}."),
    "account": ("I cannot reset the password for user {n}.", "Please merge my two profiles, id {n}.",
                "My email change request {n} was ignored.", "Two-factor codes for account {n} never come."),
    "praise": ("Great support on ticket {n}, thank you!", "Fast answer about case {n}, much appreciated.",
               "The new release {n} is excellent.", "Lovely experience with agent {n}."),
}


def labelled_table(rows: int = 100_000, *, seed: int = 0) -> tuple[Any, Any]:
    """(frame, labels): columns user, date, text; the label of each row is only implied by its text."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    label_idx = rng.choice(len(LABELS), size=rows, p=[0.3, 0.25, 0.2, 0.15, 0.1])
    template_idx = rng.integers(0, 4, size=rows)
    numbers = rng.integers(100, 99_999, size=rows)
    texts = [_TEMPLATES[LABELS[li]][ti].format(n=n) for li, ti, n in zip(label_idx, template_idx, numbers,
                                                                          strict=True)]
    frame = pd.DataFrame({
        "user": pd.array([f"user{u:05d}" for u in rng.integers(0, max(1, rows // 20), size=rows)], dtype="str"),
        "date": pd.Timestamp("2025-01-01") + pd.to_timedelta(rng.integers(0, 365, size=rows), unit="D"),
        "text": pd.array(texts, dtype="str"),
    })
    labels = pd.Series(np.array(LABELS)[label_idx], name="label")
    return frame, labels


def _key(text: str) -> str:
    """The words that tell templates apart: the first word, or the first two after 'The' / 'I'."""
    words = text.split(" ", 2)
    return " ".join(words[:2]) if words[0] in ("The", "I") else words[0]


_KEY_LABEL = {_key(template): label for label, templates in _TEMPLATES.items() for template in templates}
assert len(_KEY_LABEL) == sum(len(t) for t in _TEMPLATES.values()), "template keys must be unique"


def label_of(text: str) -> str:
    """The hidden label of a `labelled_table` text (what a perfect sub-model would answer)."""
    return _KEY_LABEL.get(_key(text), "unknown")


def log_folder(root: str | Path, *, seed: int = 0, days: int = 5, lines_per_day: int = 2000) -> Path:
    """A folder of service logs, a runbook, JSON-lines events, a CSV and a Parquet table."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    base = Path(root)
    (base / "logs").mkdir(parents=True, exist_ok=True)
    services = ("api", "billing", "search", "auth")
    for day in range(days):
        lines = []
        for i in range(lines_per_day):
            svc = services[int(rng.integers(0, len(services)))]
            level = "ERROR" if rng.random() < (0.08 if svc == "billing" else 0.02) else "INFO"
            lines.append(f"2025-03-{day + 1:02d}T{i % 24:02d}:{i % 60:02d}:00 {level} {svc} request {i} "
                         f"{'failed: upstream timeout' if level == 'ERROR' else 'ok'}")
        (base / "logs" / f"day{day + 1}.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (base / "runbook.md").write_text(
        "# Runbook\n\nOn-call owner for billing: Dana Ito.\nOn-call owner for search: Lee Park.\n"
        "Escalate upstream timeouts after 50 errors a day.\n", encoding="utf-8")
    with (base / "events.jsonl").open("w", encoding="utf-8") as fh:
        for i in range(500):
            fh.write(json.dumps({"id": i, "service": services[i % 4], "deploy": i % 97 == 0}) + "\n")
    pd.DataFrame({"service": services, "tier": ["gold", "gold", "silver", "gold"]}).to_csv(
        base / "services.csv", index=False)
    pd.DataFrame({"service": list(services), "monthly_cost": [1200.0, 5400.0, 800.0, 300.0]}).to_parquet(
        base / "costs.parquet")
    for path in base.rglob("*"):  # the same files get the same times, so summaries (and replays) repeat
        if path.is_file():
            os.utime(path, (GENERATED_AT, GENERATED_AT))
    return base
