"""The root model's conversation, and trimming it to fit `max_context_tokens`.

The opening messages (system rules, the question with the InputsSummary, later questions of a
continued run) are never dropped, nor is the latest turn (nor the one before it, unless the two do not
fit together). When the conversation is too long, the
lowest-value middle turns go first: turns with neither an error nor findings, oldest first, then
the others, oldest first. A one-line note right after the opening says which turns were dropped.

With `compaction="summarize"` the loop has the root model write a summary of the turns a trim
drops (`add_summary`); the summary is shown in that note instead of the bare list of turns.

The system prompt and the opening are sent byte-identical on every turn (nothing in them counts
turns or tells the time), so a provider's prompt cache can serve them (see `prompt_cache`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .models import Message
from .prompts import render
from .tokens import count_tokens

KEEP_LATEST = 2


@dataclass
class TurnRecord:
    """One exchange: the model's reply and the observation it got back."""

    turn: int
    reply: str
    observation: str
    error: bool = False
    findings: bool = False
    tokens: int = 0


@dataclass
class Conversation:
    system: str
    opening: list[str]
    model: str | None = None
    entries: list[TurnRecord | str] = field(default_factory=list)  # str: a later user question
    dropped: list[int] = field(default_factory=list)
    summary: str = ""  # the root model's summaries of dropped turns, oldest first
    _fixed: tuple[int, int] = (-1, 0)  # (number of fixed texts, their tokens): counted once per change

    def add_turn(self, record: TurnRecord) -> None:
        record.tokens = count_tokens(record.reply, self.model) + count_tokens(record.observation, self.model) + 8
        self.entries.append(record)

    def add_question(self, text: str) -> None:
        self.entries.append(text)

    @property
    def turns(self) -> list[TurnRecord]:
        return [e for e in self.entries if isinstance(e, TurnRecord)]

    def add_summary(self, text: str) -> None:
        """Keep a summary of dropped turns (shown after the opening, counted in `tokens()`)."""
        self.summary = f"{self.summary}\n\n{text.strip()}".strip()

    def _fixed_tokens(self) -> int:
        texts = [self.system, *self.opening, *(e for e in self.entries if isinstance(e, str)), self.summary]
        if self._fixed[0] != len(texts) + len(self.summary):
            self._fixed = (len(texts) + len(self.summary), sum(count_tokens(t, self.model) + 4 for t in texts))
        return self._fixed[1]

    def tokens(self) -> int:
        return self._fixed_tokens() + sum(t.tokens for t in self.turns if t.turn not in self.dropped)

    def trim(self, max_tokens: int) -> list[int]:
        """Drop middle turns until the conversation fits; returns the turns dropped by this call."""
        total = self.tokens()
        if total <= max_tokens:
            return []
        kept = [t for t in self.turns if t.turn not in self.dropped]
        candidates = kept[:-KEEP_LATEST] if len(kept) > KEEP_LATEST else []
        # then the older of the latest turns: a request over the window would be refused outright
        order = sorted(candidates, key=lambda t: (t.error or t.findings, t.turn)) + kept[len(candidates):-1]
        newly: list[int] = []
        for record in order:
            if total <= max_tokens:
                break
            newly.append(record.turn)
            total -= record.tokens
        self.dropped.extend(newly)
        return sorted(newly)

    def messages(self) -> list[Message]:
        out: list[Message] = [{"role": "system", "content": self.system}]
        out.extend({"role": "user", "content": text} for text in self.opening)
        if self.dropped:  # its own message: the opening stays byte-identical for the provider's prompt cache
            turns = _ranges(sorted(self.dropped))
            note = render("compacted", turns=turns, summary=self.summary) if self.summary else \
                render("trimmed", turns=turns)
            out.append({"role": "user", "content": note})
        for entry in self.entries:
            if isinstance(entry, str):
                out.append({"role": "user", "content": entry})
            elif entry.turn not in self.dropped:
                out.append({"role": "assistant", "content": entry.reply})
                out.append({"role": "user", "content": entry.observation})
        return out


def _ranges(turns: list[int]) -> str:
    """[1, 2, 3, 5] -> '1-3, 5'."""
    parts: list[str] = []
    start = prev = turns[0]
    for t in [*turns[1:], None]:
        if t is not None and t == prev + 1:
            prev = t
            continue
        parts.append(f"{start}" if start == prev else f"{start}-{prev}")
        if t is not None:
            start = prev = t
    return ", ".join(parts)
