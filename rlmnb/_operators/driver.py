"""The map driver: chunks of items -> packed rounds -> validated answers, with bounded re-asks.

Per chunk of items, the first round sends every pack in ONE batch (so the budget reserves it whole,
all-or-nothing), then each re-ask round sends what is still without a valid answer, again as one batch,
at most `retries` times: an item whose answer was missing, unparsable or invalid goes alone; a pack whose
call failed as a whole (an "[error]" slot: rate limit, timeout) goes again as the same pack, so a failing
provider is not hit with one call per item; a pack too large for the sub-model is split into single items,
and a single item too large is final at once. An item that still fails is None in the result and
listed with its reason. When the budget refuses a round, nothing of that round was sent: the map
stops, every item not yet answered is None ("not sent"), and the partial result comes back with the
report, so the model code keeps what was paid for.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rlmnb._ground.errors import BudgetExhausted
from rlmnb._operators.outputs import OutputSpec
from rlmnb._operators.packing import estimate_tokens, parse_reply, plan_packs, render_pack
from rlmnb._operators.report import ItemError, MapReport
from rlmnb._operators.sources import Source

PREVIEW_CHARS = 80  # of an item's text, in its error record
_TOO_LARGE = "PromptTooLarge"


@dataclass
class _Item:
    pos: int  # position in the whole input
    text: str
    size: int
    attempts: int = 0
    reason: str = ""
    final: bool = False  # re-asking cannot help (too large for the sub-model on its own)


@dataclass
class MapState:
    """What one map has done so far; becomes the MapReport."""

    values: list[Any] = field(default_factory=list)
    errors: list[tuple[int, ItemError]] = field(default_factory=list)  # (position, error)
    packs: int = 0
    reasks: int = 0
    calls: int = 0
    rounds: int = 0
    stopped: str | None = None


Send = Callable[[list[str], list[list[int]]], list[str]]  # prompts, the item positions of each -> replies


class MapDriver:
    """Runs one map over a Source with a `send(prompts) -> replies` that is one budgeted batch."""

    def __init__(self, *, instruction: str, spec: OutputSpec, send: Send, pack_tokens: int, pack_items: int,
                 retries: int, key: Callable[[int], Any]) -> None:
        self.instruction = instruction
        self.spec = spec
        self.output_text = spec.describe()
        self.send = send
        self.pack_tokens = pack_tokens
        self.pack_items = pack_items
        self.retries = retries
        self.key = key  # position -> the index label shown in error records
        self.state = MapState()
        self._fixed = estimate_tokens(render_pack(instruction, self.output_text, []))

    def run(self, source: Source) -> MapState:
        started = time.perf_counter()
        for texts in source.chunks:
            base = len(self.state.values)
            self.state.values.extend([None] * len(texts))
            items = [_Item(base + i, t, estimate_tokens(t)) for i, t in enumerate(texts)]
            if self.state.stopped is not None:
                self._fail_all(items, f"not sent: {self.state.stopped}")
                continue
            self._chunk(items)
        self.elapsed = time.perf_counter() - started
        return self.state

    # ---- one chunk -------------------------------------------------------------------------------
    def _chunk(self, items: list[_Item]) -> None:
        packs = [[items[p] for p in pack] for pack in plan_packs([i.size for i in items], self.pack_tokens,
                                                                 self.pack_items, self._fixed)]
        again = self._round(packs, retry=False)
        while again and self.state.stopped is None:
            keep: list[list[_Item]] = []
            for pack in again:
                if all(i.attempts <= self.retries and not i.final for i in pack):
                    keep.append(pack)
                else:
                    self._fail_all(pack)
            if not keep:
                return
            self.state.reasks += sum(len(pack) for pack in keep)
            again = self._round(keep, retry=True)
        if self.state.stopped is not None:
            self._fail_all([i for pack in again for i in pack], f"not sent: {self.state.stopped}")

    def _round(self, packs: list[list[_Item]], *, retry: bool) -> list[list[_Item]]:
        """Send packs as one batch; returns what to ask again (packs of the items without a valid answer)."""
        prompts = [render_pack(self.instruction, self.output_text, [i.text for i in pack],
                               (pack[0].reason, pack[0].attempts + 1) if retry else None) for pack in packs]
        try:
            replies = self.send(prompts, [[i.pos for i in pack] for pack in packs])
        except BudgetExhausted as exc:
            self.state.stopped = str(exc).split(";")[0]
            return packs
        self.state.rounds += 1
        self.state.calls += len(prompts)
        if not retry:
            self.state.packs += len(packs)
        again: list[list[_Item]] = []
        for pack, reply in zip(packs, replies, strict=True):
            again.extend(self._take(pack, reply))
        return again

    def _take(self, pack: list[_Item], reply: str) -> list[list[_Item]]:
        for item in pack:
            item.attempts += 1
        if reply.startswith("[error]"):
            reason = reply[len("[error]"):].strip()
            for item in pack:
                item.reason = reason
                item.final = len(pack) == 1 and reason.startswith(_TOO_LARGE)
            if reason.startswith(_TOO_LARGE) and len(pack) > 1:
                return [[item] for item in pack]  # the estimate was off: each item alone fits
            return [pack]
        answers, problems = parse_reply(reply, len(pack))
        failed = []
        for number, item in enumerate(pack, 1):
            if number in problems:
                item.reason = problems[number]
                failed.append(item)
                continue
            try:
                self.state.values[item.pos] = self.spec.validate(answers[number])
            except ValueError as exc:
                item.reason = str(exc)
                failed.append(item)
        return [[item] for item in failed]

    def _fail_all(self, items: list[_Item], reason: str | None = None) -> None:
        for item in items:
            preview = item.text if len(item.text) <= PREVIEW_CHARS else item.text[:PREVIEW_CHARS - 3] + "..."
            self.state.errors.append((item.pos, ItemError(index=_plain(self.key(item.pos)), item=preview,
                                                          reason=reason or item.reason, attempts=item.attempts)))

    def report(self, operator: str) -> MapReport:
        s = self.state
        return MapReport(operator=operator, items=len(s.values), packs=s.packs, reasks=s.reasks,
                         failures=len(s.errors), calls=s.calls, rounds=s.rounds, stopped=s.stopped,
                         errors=tuple(e for _, e in sorted(s.errors, key=lambda pair: pair[0])),
                         wall_s=round(getattr(self, "elapsed", 0.0), 6))


def _plain(value: Any) -> Any:
    """An index label as a JSON-friendly value (numpy scalars, timestamps -> Python or str)."""
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    item = getattr(value, "item", None)
    if callable(item):
        try:
            plain = item()
            if isinstance(plain, str | int | float | bool):
                return plain
        except Exception:
            pass
    return str(value)


__all__ = ["MapDriver", "MapState", "PREVIEW_CHARS", "Send"]
