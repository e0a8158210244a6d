"""What a run tree's runs share (`TreeResources`) and one run to execute (`RunSpec`).

They sit below `runs.py` (which executes runs and starts child runs) and are built by `api.py`, so
neither needs the other to name a run. How a run ended is `turn.Outcome`; what a finished run leaves
open is `turn.Session`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rlmnb._engine.budget import Budget
from rlmnb._engine.cache import ResponseCache
from rlmnb._engine.conversation import Conversation
from rlmnb._engine.verify import Verifier
from rlmnb._ground.concurrency import AdaptiveLimiter
from rlmnb._ground.config import RLMConfig
from rlmnb._guards.schema import AnswerSchema
from rlmnb._models.base import LM
from rlmnb._sandbox.base import Sandbox
from rlmnb.events import EventBus

if TYPE_CHECKING:
    from rlmnb.inputs import Field, InputsSummary

__all__ = ["RunSpec", "TreeResources"]


@dataclass
class TreeResources:
    """The models, settings, guard, budget, event bus, sub-call limiter and cache every run of one tree shares."""

    config: RLMConfig
    root_lm: LM
    sub_lm: LM
    child_lm: LM | None
    tools: dict[str, Callable[..., Any]]
    schema: AnswerSchema | None
    budget: Budget
    bus: EventBus
    verify: Verifier | None = None
    limiter: AdaptiveLimiter | None = None  # the limiter of every sub-call in the tree (made by the first run)
    cache: ResponseCache | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    root_run_id: str = ""
    pinned_models: bool = False  # replay: every model name a run asks for is served by sub_lm

    def child_root_lm(self) -> LM:
        return self.child_lm if self.child_lm is not None else self.sub_lm


@dataclass
class RunSpec:
    """One run to execute."""

    question: str
    fields: Sequence[Field]
    summary: InputsSummary
    depth: int = 0
    parent_run_id: str | None = None
    parent_turn: int | None = None
    label: str = ""
    root_lm: LM | None = None  # None: the tree's root model (depth 0) or child model (deeper)
    conversation: Conversation | None = None  # a continued run's conversation
    sandbox: Sandbox | None = None  # a continued run's sandbox
    bind_fields: Sequence[Field] | None = None  # what to bind now (default: all fields)
    keep_session: bool = False
    refine_level: int = 0
    answers_question: bool = True  # False for rlm_query children: the user's schema is not theirs
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
