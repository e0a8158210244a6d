"""What the root model reads: its conversation, trimmed to fit, and the observation of each step.

Entry points: `Conversation` (`messages()` is what a root request sends; `trim(max_tokens)` makes it
fit `max_context_tokens`), `build` (the observation of one executed snippet), `no_code` (the
observation of a reply with nothing to run) and `reply_notes` (what the model must know about how its
reply was read).

Trimming: the opening messages (system rules, the question with the InputsSummary, later questions of
a continued run) are never dropped, nor is the latest turn (nor the one before it, unless the two do
not fit together). The lowest-value middle turns go first: repeated steps (they add nothing new),
then turns with neither an error nor findings, oldest first, then the others, oldest first. A one-line
note right after the opening says which turns were dropped. When the kept turns alone are still over
the window (one output near its size, or a model whose tokenizer counts more than ours), their
observations are cut in the middle, largest first, each with the marker that says what it left out. With `compaction="summarize"` the loop has the root model write a summary of the
turns a trim drops (`add_summary`); the summary is shown in that note instead of the bare list of turns.

The system prompt and the opening are sent byte-identical on every turn (nothing in them counts turns
or tells the time), so a provider's prompt cache can serve them (see `prompt_cache`).

An observation is a turn header, the snippet's output clipped in the middle to size,
and notes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlmnb._engine.replies import Step
from rlmnb._ground.prompts import load, render
from rlmnb._ground.text import clip
from rlmnb._ground.tokens import count_tokens
from rlmnb._models.base import Message
from rlmnb._sandbox.base import ExecResult

__all__ = ["KEEP_LATEST", "Conversation", "TurnRecord", "build", "build_lines", "clip_middle", "header",
           "no_code", "output_of", "reply_notes"]


KEEP_LATEST = 2
CLIP_FLOOR_TOKENS = 200
"""A kept observation is never cut below this: its head and tail still show what the step printed."""
CLIP_MARGIN_TOKENS = 50
"""Cut this much more than the excess: the marker that says what was left out takes room too."""


@dataclass
class TurnRecord:
    """One exchange: the model's reply and the observation it got back."""

    turn: int
    reply: str
    observation: str
    error: bool = False
    findings: bool = False
    tokens: int = 0
    repeat: bool = False  # the step repeated an earlier one (same code, same output): it adds nothing new


@dataclass
class Conversation:
    system: str
    opening: list[str]
    model: str | None = None
    entries: list[TurnRecord | str] = field(default_factory=list)  # str: a later user question
    dropped: list[int] = field(default_factory=list)
    clipped: list[int] = field(default_factory=list)  # the turn of each cut made to fit the window, in order
    summary: str = ""  # the root model's summaries of dropped turns, oldest first
    _fixed: tuple[int, int] = (-1, 0)  # (number of fixed texts, their tokens): counted once per change

    def add_turn(self, record: TurnRecord) -> None:
        self._count(record)
        self.entries.append(record)

    def _count(self, record: TurnRecord) -> None:
        record.tokens = count_tokens(record.reply, self.model) + count_tokens(record.observation, self.model) + 8

    def add_question(self, text: str) -> None:
        self.entries.append(text)

    def given(self) -> list[str]:
        """The texts the model was given besides its own steps: the opening, later questions, revision requests."""
        return [*self.opening, *(e for e in self.entries if isinstance(e, str))]

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
        order = sorted(candidates, key=lambda t: (not t.repeat, t.error or t.findings, t.turn)) + \
            kept[len(candidates):-1]
        newly: list[int] = []
        for record in order:
            if total <= max_tokens:
                break
            newly.append(record.turn)
            total -= record.tokens
        self.dropped.extend(newly)
        if total > max_tokens:
            self._clip_kept(total - max_tokens)
        return sorted(newly)

    def _clip_kept(self, excess: int) -> None:
        """Cut the middle of the kept turns' observations, largest first, by about `excess` tokens: what is left
        when every droppable turn is gone (one output near the window's size) must still fit, or the request is
        refused and the run ends with the turns it paid for. Each cut says how much it left out (`clip_middle`)."""
        kept = [t for t in self.turns if t.turn not in self.dropped]
        for record in sorted(kept, key=lambda t: -t.tokens):
            if excess <= 0:
                break
            own = count_tokens(record.observation, self.model)
            if own <= CLIP_FLOOR_TOKENS:
                continue
            keep = max(CLIP_FLOOR_TOKENS, own - excess - CLIP_MARGIN_TOKENS)
            before = record.tokens
            record.observation = clip_middle(record.observation, len(record.observation) * keep // own)
            self._count(record)
            excess -= before - record.tokens
            self.clipped.append(record.turn)

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


# ---- observations ---------------------------------------------------------------------------------
def clip_middle(text: str, limit: int) -> str:
    """Keep the head and tail of `text` within `limit` characters, stating the true length."""
    half = max(1, limit // 2)
    return clip(text, limit, keep="both", head=half, tail=half,
                marker=lambda omitted, total: render("truncated", omitted=f"{omitted:,}", total=f"{total:,}"))


def header(turn: int, max_turns: int) -> str:
    return render("turn_header", turn=turn, max_turns=max_turns)


def output_of(result: ExecResult) -> str:
    """Everything a snippet showed (to compare steps): stdout, stderr, error, timeout."""
    return "\x00".join((result.stdout, result.stderr, result.error or "", "timeout" if result.timed_out else ""))


def reply_notes(step: Step, max_tokens: int | None) -> list[str]:
    """What the model must know about how its reply was read: output it invented, a cut reply."""
    notes = []
    if step.invented_outputs or step.blocks_not_run:
        later = render("later_blocks", count=step.blocks_not_run) if step.blocks_not_run else ""
        notes.append("[note] " + render("outputs_removed", count=step.invented_outputs, later=later))
    if step.cut:
        where = load("cut_in_block") if step.unfinished else ""
        limit = f" ({max_tokens:,} tokens)" if max_tokens else ""
        notes.append("[note] " + render("reply_cut", limit=limit, where=where))
    if step.empty:
        notes.append("[note] " + load("empty_reply"))
    return notes


def build(result: ExecResult, *, turn: int, max_turns: int, max_chars: int, timeout: float,
          extra: list[str] | None = None, nudge: bool = True) -> str:
    """The observation text for one executed snippet: the turn header, the output (head and tail kept), then the
    `extra` notes (the reply's and the policies'); `nudge=False` after an accepted submit."""
    notes = list(extra or [])
    parts: list[str] = []
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
    if result.stderr.strip():
        parts.append("[stderr]\n" + result.stderr.rstrip("\n"))
    if result.error:
        parts.append("[error]\n" + result.error)
    if result.timed_out:
        parts.append("[timeout] " + render("timeout", timeout=f"{timeout:g}"))
    if result.notice:
        parts.append("[notice] " + result.notice)
    body = "\n".join(parts) if parts else load("no_output")
    return build_lines([header(turn, max_turns), clip_middle(body, max_chars), *notes], turn, max_turns, nudge)


def build_lines(lines: list[str], turn: int, max_turns: int, nudge: bool) -> str:
    left = max_turns - turn
    if nudge and 0 < left <= 2:
        lines.append(render("end_near", left=left))
    return "\n".join(lines)


def no_code(turn: int, max_turns: int, notes: list[str] | None = None) -> str:
    """The observation of a reply with nothing to run: the header, the reply's notes, and that nothing ran."""
    lines = [header(turn, max_turns), *(notes or []), load("no_code")]
    left = max_turns - turn
    if 0 < left <= 2:
        lines.append(render("end_near", left=left))
    return "\n".join(lines)
