"""The host side of llm_map / llm_classify / llm_filter: one group of packed batches per map.

The packing, validation and re-asks run in the sandbox (rlmnb/operators/), next to the data and the
user's output classes. The host only opens a map (emitting `MapStarted` and handing back the packing
limits, which follow the sub-model's window), sends each round of packed prompts through the very
same `SubCaller.query_batched` as `llm_query_batched` (budget reserved whole, limiter, cache, events),
tagged with the map's id, and closes the map with its figures (`MapFinished`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from rlmnb._engine.subcalls import SubCaller
from rlmnb._models.base import model_label
from rlmnb.events import MapFinished, MapStarted

DEFAULT_PACK_TOKENS = 4_000  # when the sub-model's window is unknown
MAX_PACK_TOKENS = 8_000  # larger packs save little and make long replies (and their mistakes) likelier
MAX_ERRORS_KEPT = 20  # failed items listed in a MapFinished event


def pack_limits(sub: SubCaller) -> dict[str, Any]:
    """Token target and item cap of one pack, and the largest prompt the sub-model takes (None: unknown)."""
    cap = sub.prompt_cap(sub.lm)
    target = sub.config.pack_tokens
    if target is None:
        target = DEFAULT_PACK_TOKENS if cap is None else max(256, min(MAX_PACK_TOKENS, cap // 4))
    elif cap is not None:
        target = min(target, cap)
    return {"pack_tokens": int(target), "pack_items": sub.config.pack_items, "retries": sub.config.map_retries,
            "max_prompt_tokens": cap}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


class MapHost:
    """Opens, feeds and closes the maps of one run; every sub-call goes through the run's SubCaller."""

    def __init__(self, sub: SubCaller) -> None:
        self.sub = sub
        self._count = 0
        self._open: dict[str, tuple[int, float]] = {}  # map_id -> (turn, started)

    def begin(self, info: Mapping[str, Any]) -> dict[str, Any]:
        """Emit MapStarted; return the map's id and its packing limits."""
        self._count += 1
        map_id = f"{self.sub.scope.run_id}-m{self._count}"
        turn = self.sub.turn()
        limits = pack_limits(self.sub)
        items = info.get("items")
        self.sub.bus.emit(MapStarted, self.sub.scope, map_id=map_id, turn=turn,
                          operator=str(info.get("operator") or "llm_map")[:40],
                          instruction=str(info.get("instruction") or "")[:2_000],
                          output=str(info.get("output") or "")[:500],
                          items=items if isinstance(items, int) and not isinstance(items, bool) else None,
                          pack_tokens=limits["pack_tokens"], pack_items=limits["pack_items"])
        self._open[map_id] = (turn, time.perf_counter())
        return {"map_id": map_id, "model": model_label(self.sub.lm), **limits}

    async def batch(self, map_id: str, prompts: list[str], model: str | None = None) -> list[str]:
        """One round of packed prompts: exactly llm_query_batched, grouped under the map."""
        if map_id not in self._open:
            raise ValueError(f"no open map {map_id!r}; llm_map opens one itself")
        return await self.sub.query_batched(prompts, model, group=map_id)

    def end(self, map_id: str, figures: Mapping[str, Any]) -> None:
        """Emit MapFinished with the map's figures (items, packs, re-asks, failures)."""
        turn, started = self._open.pop(map_id, (self.sub.turn(), time.perf_counter()))
        errors = figures.get("errors")
        kept = [{"item": str(e.get("item", ""))[:200], "reason": str(e.get("reason", ""))[:300]}
                for e in (errors if isinstance(errors, list) else [])[:MAX_ERRORS_KEPT] if isinstance(e, dict)]
        stopped = figures.get("stopped")
        self.sub.bus.emit(MapFinished, self.sub.scope, map_id=map_id, turn=turn, items=_int(figures.get("items")),
                          packs=_int(figures.get("packs")), reasks=_int(figures.get("reasks")),
                          failures=_int(figures.get("failures")), calls=_int(figures.get("calls")),
                          latency_s=round(time.perf_counter() - started, 6),
                          stopped=str(stopped)[:500] if stopped else None, errors=kept)
