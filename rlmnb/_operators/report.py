"""The record of one map: its packing figures and the items that failed, with why.

Kept on the result (`result.attrs["llm_map"]`, `result.attrs["llm_errors"]`), printed by the call so
the root model sees it in its observation, and sent to the host for the widget's map group.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SHOWN_ERRORS = 5  # failed items printed; the rest stay in attrs


@dataclass(frozen=True)
class ItemError:
    """An item that failed (None or "[error] ..." in the result): where it is (its index label or position), a preview, and the reason."""

    index: Any
    item: str
    reason: str
    attempts: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "item": self.item, "reason": self.reason, "attempts": self.attempts}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ItemError:
        return cls(index=data.get("index"), item=str(data.get("item", "")), reason=str(data.get("reason", "")),
                   attempts=int(data.get("attempts", 0)))


@dataclass(frozen=True)
class MapReport:
    """Figures of one llm_map / llm_classify / llm_filter call."""

    operator: str
    items: int
    packs: int
    reasks: int
    failures: int
    calls: int
    rounds: int = 0
    stopped: str | None = None
    errors: tuple[ItemError, ...] = field(default_factory=tuple)
    wall_s: float = 0.0
    marked: bool = False  # failed items hold "[error] <reason>" in the result (text outputs), else None

    def to_dict(self) -> dict[str, Any]:
        return {"operator": self.operator, "items": self.items, "packs": self.packs, "reasks": self.reasks,
                "failures": self.failures, "calls": self.calls, "rounds": self.rounds, "stopped": self.stopped,
                "errors": [e.to_dict() for e in self.errors], "wall_s": self.wall_s,
                "marked": self.marked}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MapReport:
        return cls(operator=str(data.get("operator", "llm_map")), items=int(data.get("items", 0)),
                   packs=int(data.get("packs", 0)), reasks=int(data.get("reasks", 0)),
                   failures=int(data.get("failures", 0)), calls=int(data.get("calls", 0)),
                   rounds=int(data.get("rounds", 0)), stopped=data.get("stopped"),
                   errors=tuple(ItemError.from_dict(e) for e in data.get("errors", [])),
                   wall_s=float(data.get("wall_s", 0.0)), marked=bool(data.get("marked", False)))

    def text(self) -> str:
        """What the call prints: one line of figures, then the first failed items."""
        line = (f"{self.operator}: {self.items:,} item{'s' if self.items != 1 else ''} in {self.packs:,} "
                f"pack{'s' if self.packs != 1 else ''}, {self.calls:,} sub-call{'s' if self.calls != 1 else ''}, "
                f"{self.reasks:,} re-asked, {self.failures:,} failed")
        held = "'[error] <reason>'" if self.marked else "None"
        lines = [line + (f" ({held} in the result; reasons in result.attrs['llm_errors'])" if self.failures else "")]
        errors = list(self.errors)
        if self.stopped:
            lines.append(f"  stopped early: {self.stopped}")
            reason = f"not sent: {self.stopped}"
            kept = [e for e in errors if e.reason != reason]
            unsent = len(errors) - len(kept)
            if unsent:  # one line for the items the stop left unsent, not one per item
                errors = kept
                lines.append(f"  {unsent:,} item{'s were' if unsent != 1 else ' was'} not sent.")
            if "sub-call budget" in self.stopped:
                lines.append("  Cut the items down with code first (filter the rows with pandas or sql(); a column "
                             "may already hold what you need), or submit what you have.")
        for error in errors[:SHOWN_ERRORS]:
            lines.append(f"  [{error.index!r}] {error.reason} <- {error.item!r}")
        if len(errors) > SHOWN_ERRORS:
            lines.append(f"  ... {len(errors) - SHOWN_ERRORS:,} more")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"MapReport({self.operator}: items={self.items}, packs={self.packs}, reasks={self.reasks}, "
                f"failures={self.failures}, calls={self.calls})")


__all__ = ["ItemError", "MapReport", "SHOWN_ERRORS"]
