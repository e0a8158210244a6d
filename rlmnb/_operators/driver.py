"""The map driver: chunks of items -> packed rounds -> validated answers, with re-asks until none is lost.

Per chunk of items, the first round sends every pack in ONE batch (so the budget reserves it whole,
all-or-nothing), then each re-ask round sends what is still without a valid answer, again as one batch.
An item whose answer was missing, unparsable or invalid is asked again in a pack half the size of the one
it failed in (50 -> 25 -> 12 -> ... -> 1), so a sub-model that drops a few items of every reply is asked
until each is answered, for a few calls more than the first round; once alone, an item is re-asked at most
`retries` times. A pack whose call failed as a whole (an "[error]" slot: rate limit, timeout) goes again
as the same pack, at most `retries` times, so a failing provider is not hit with one call per item; a pack
too large for the sub-model is split into single items, and a single item too large is final at once.
`retries=0` asks every item once. An item that still fails is marked in the result (`"[error] <reason>"`
for text and label outputs, None for typed ones) and listed with its reason in the report. When the budget
refuses a round, nothing of that round was sent: the map stops, every item not yet answered is marked
("not sent"), and the partial result comes back with the report, so the model code keeps what was paid for.

Chunks overlap: while one chunk's batch is in flight the next is read, packed and sent from a worker
thread, so the host's limiter never runs dry between chunks (a barrier per chunk would leave it idle
for the slowest call of every round). At most about `window` packs are in flight or queued at once
(the host's concurrency limit, twice over) and at most MAX_CHUNKS_IN_FLIGHT chunks, so the items held
in memory stay bounded whatever the input's size. `window=0` sends chunk after chunk from the calling
thread. Results keep their positions whatever order the batches finish in.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ALL_COMPLETED, FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from rlmnb._ground.errors import BudgetExhausted
from rlmnb._operators.outputs import OutputSpec
from rlmnb._operators.packing import estimate_tokens, parse_reply, plan_packs, render_pack
from rlmnb._operators.report import ItemError, MapReport
from rlmnb._operators.sources import Source

PREVIEW_CHARS = 80  # of an item's text, in its error record
MAX_CHUNKS_IN_FLIGHT = 8  # chunks sent and not yet done: bounds the items held (8 x CHUNK_ROWS)
_TOO_LARGE = "PromptTooLarge"
ERROR_MARK = "[error]"  # what a failed item of a text or label output holds, before its reason


@dataclass
class _Item:
    pos: int  # position in the whole input
    text: str
    size: int
    attempts: int = 0
    reason: str = ""
    final: bool = False  # re-asking cannot help (too large for the sub-model on its own)
    pack_cap: int = 0  # the most items its next re-ask may share a prompt with (halved at each failure)
    alone_reasks: int = 0  # re-asks sent with it alone in the prompt (at most `retries`)
    failed_calls: int = 0  # calls of its pack that failed whole (re-sent as the same pack at most `retries` times)


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
                 retries: int, key: Callable[[int], Any], window: int = 0) -> None:
        self.instruction = instruction
        self.window = window  # packs in flight or queued at once across chunks; 0: one chunk at a time
        self.spec = spec
        self.output_text = spec.describe()
        self.send = send
        self.pack_tokens = pack_tokens
        self.pack_items = pack_items
        self.retries = retries
        self.key = key  # position -> the index label shown in error records
        self.state = MapState()
        self._lock = threading.Lock()  # the counters of MapState, updated from the chunks' threads
        self._fixed = estimate_tokens(render_pack(instruction, self.output_text, []))

    def run(self, source: Source) -> MapState:
        started = time.perf_counter()
        try:
            if self.window > 0:
                self._pipelined(source)
            else:
                for texts in source.chunks:
                    self._chunk(self._packs(texts))
        finally:
            self.elapsed = time.perf_counter() - started
        return self.state

    def _packs(self, texts: list[str]) -> list[list[_Item]]:
        """The next chunk's items, given their places in the result, planned into packs."""
        base = len(self.state.values)
        self.state.values.extend([None] * len(texts))
        items = [_Item(base + i, t, estimate_tokens(t)) for i, t in enumerate(texts)]
        return [[items[p] for p in pack] for pack in plan_packs([i.size for i in items], self.pack_tokens,
                                                                self.pack_items, self._fixed)]

    def _pipelined(self, source: Source) -> None:
        """Chunks read and packed here, each sent and re-asked in a worker thread, several at once."""
        pool = ThreadPoolExecutor(max_workers=MAX_CHUNKS_IN_FLIGHT, thread_name_prefix="rlmnb-map")
        pending: dict[Future[None], int] = {}  # chunk -> its packs

        def settle(when: str) -> None:
            done, _ = wait(pending, return_when=when)
            for chunk in done:
                del pending[chunk]
                chunk.result()  # a chunk's exception (an interrupt, a dropped bridge) ends the map here

        try:
            for texts in source.chunks:
                packs = self._packs(texts)
                while pending and (sum(pending.values()) + len(packs) > self.window
                                   or len(pending) >= MAX_CHUNKS_IN_FLIGHT):
                    settle(FIRST_COMPLETED)
                pending[pool.submit(self._chunk, packs)] = len(packs)
            if pending:
                settle(ALL_COMPLETED)
        except BaseException:
            # an interrupt or a failed bridge: chunks not started are never sent; those in flight end
            # on the host's side (the step's end cancels their calls)
            with self._lock:
                self.state.stopped = self.state.stopped or "the map was interrupted"
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)

    # ---- one chunk -------------------------------------------------------------------------------
    def _chunk(self, packs: list[list[_Item]]) -> None:
        if self.state.stopped is not None:
            self._fail_all([i for pack in packs for i in pack], f"not sent: {self.state.stopped}")
            return
        again = self._round(packs, retry=False)
        while again and self.state.stopped is None:
            keep: list[list[_Item]] = []
            for pack in again:
                if all(self._may_reask(item, len(pack)) for item in pack):
                    keep.append(pack)
                else:
                    self._fail_all(pack)
            if not keep:
                return
            with self._lock:
                self.state.reasks += sum(len(pack) for pack in keep)
            for pack in keep:
                if len(pack) == 1:
                    pack[0].alone_reasks += 1
            again = self._round(keep, retry=True)
        if self.state.stopped is not None:
            self._fail_all([i for pack in again for i in pack], f"not sent: {self.state.stopped}")

    def _may_reask(self, item: _Item, pack_size: int) -> bool:
        """Whether an item without a valid answer is asked again, in a pack of `pack_size` items."""
        if item.final or self.retries == 0 or item.failed_calls > self.retries:
            return False
        return pack_size > 1 or item.alone_reasks < self.retries

    def _round(self, packs: list[list[_Item]], *, retry: bool) -> list[list[_Item]]:
        """Send packs as one batch; returns what to ask again (packs of the items without a valid answer)."""
        prompts = [render_pack(self.instruction, self.output_text, [i.text for i in pack],
                               (pack[0].reason, pack[0].attempts + 1) if retry else None) for pack in packs]
        try:
            replies = self.send(prompts, [[i.pos for i in pack] for pack in packs])
        except BudgetExhausted as exc:
            with self._lock:
                self.state.stopped = self.state.stopped or str(exc).split(";")[0]
            return packs
        with self._lock:
            self.state.rounds += 1
            self.state.calls += len(prompts)
            if not retry:
                self.state.packs += len(packs)
        again: list[list[_Item]] = []
        missed: list[_Item] = []
        for pack, reply in zip(packs, replies, strict=True):
            whole, failed = self._take(pack, reply)
            again.extend(whole)
            missed.extend(failed)
        return again + self._repack(missed)

    def _repack(self, items: list[_Item]) -> list[list[_Item]]:
        """Items that failed on their own, packed again: each with at most its (halved) cap of items."""
        packs: list[list[_Item]] = []
        for cap in sorted({item.pack_cap for item in items}, reverse=True):
            group = [item for item in items if item.pack_cap == cap]
            packs += [[group[p] for p in pack] for pack in plan_packs([i.size for i in group], self.pack_tokens,
                                                                        cap, self._fixed)]
        return packs

    def _take(self, pack: list[_Item], reply: str) -> tuple[list[list[_Item]], list[_Item]]:
        """Read one pack's reply: (packs to send again as they are, items that failed on their own)."""
        for item in pack:
            item.attempts += 1
        if reply.startswith("[error]"):
            reason = reply[len("[error]"):].strip()
            too_large = reason.startswith(_TOO_LARGE)
            for item in pack:
                item.reason = reason
                item.final = len(pack) == 1 and too_large
                item.failed_calls += 0 if too_large else 1
            if too_large and len(pack) > 1:
                return [[item] for item in pack], []  # the estimate was off: each item alone fits
            return [pack], []
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
        for item in failed:
            item.pack_cap = max(1, len(pack) // 2)
        return [], failed

    def _fail_all(self, items: list[_Item], reason: str | None = None) -> None:
        """Record items as failed: listed with their reason, and marked in the result (see module docs)."""
        for item in items:
            if self.spec.textual:
                self.state.values[item.pos] = f"{ERROR_MARK} {reason or item.reason}"
            preview = item.text if len(item.text) <= PREVIEW_CHARS else item.text[:PREVIEW_CHARS - 3] + "..."
            self.state.errors.append((item.pos, ItemError(index=_plain(self.key(item.pos)), item=preview,
                                                          reason=reason or item.reason, attempts=item.attempts)))

    def report(self, operator: str) -> MapReport:
        s = self.state
        return MapReport(operator=operator, items=len(s.values), packs=s.packs, reasks=s.reasks,
                         failures=len(s.errors), calls=s.calls, rounds=s.rounds, stopped=s.stopped,
                         errors=tuple(e for _, e in sorted(s.errors, key=lambda pair: pair[0])),
                         wall_s=round(getattr(self, "elapsed", 0.0), 6), marked=self.spec.textual)


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


__all__ = ["ERROR_MARK", "MAX_CHUNKS_IN_FLIGHT", "MapDriver", "MapState", "PREVIEW_CHARS", "Send"]
