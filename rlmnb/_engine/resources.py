"""The records of one run tree: what its runs share, one run to execute, how a run ended, what it keeps open.

They live below both `runs.py` (which executes runs) and `recursion.py` / `api.py` (which start
them), so none of those needs to import the others to name a run.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlmnb._engine.budget import Budget
from rlmnb._engine.conversation import Conversation
from rlmnb._ground.blocking import run_coroutine_blocking
from rlmnb._ground.config import RLMConfig
from rlmnb._guards.schema import AnswerSchema
from rlmnb._models.base import LM
from rlmnb._sandbox.base import Sandbox
from rlmnb.events import EventBus

__all__ = ["RunRecord", "RunSpec", "Session", "Tree"]


@dataclass
class Tree:
    """Shared by every run of one tree."""

    config: RLMConfig
    root_lm: LM
    sub_lm: LM
    child_lm: LM | None
    tools: dict[str, Callable[..., Any]]
    schema: AnswerSchema | None
    budget: Budget
    bus: EventBus
    verify: Any = None  # a Verifier (verify.py) or None
    limiter: Any = None  # the AdaptiveLimiter of every sub-call in the tree (made by the first run)
    cache: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)
    root_run_id: str = ""
    pinned_models: bool = False  # replay: every model name a run asks for is served by sub_lm

    def child_root_lm(self) -> LM:
        return self.child_lm if self.child_lm is not None else self.sub_lm


@dataclass
class RunRecord:
    """How one run ended (api.RunResult is built from the root's record)."""

    run_id: str
    status: str
    answer: Any
    reason: str = ""
    error: str | None = None
    verified: bool | None = None
    session: Any = None


@dataclass
class RunSpec:
    """One run to execute."""

    question: str
    fields: Sequence[Any]
    summary: Any
    depth: int = 0
    parent_run_id: str | None = None
    parent_turn: int | None = None
    label: str = ""
    root_lm: LM | None = None  # None: the tree's root model (depth 0) or child model (deeper)
    conversation: Conversation | None = None  # a continued run's conversation
    sandbox: Sandbox | None = None  # a continued run's sandbox
    bind_fields: Sequence[Any] | None = None  # what to bind now (default: all fields)
    keep_session: bool = False
    refine_level: int = 0
    answers_question: bool = True  # False for rlm_query children: the user's schema is not theirs
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])


@dataclass
class Session:
    """What a finished run leaves open for `continue_from`: its sandbox, conversation and inputs."""

    sandbox: Sandbox
    conversation: Conversation
    fields: list[Any]
    closed: bool = False

    def close(self) -> None:
        """Close the sandbox (for a kernel sandbox: stop its process)."""
        if not self.closed:
            self.closed = True
            run_coroutine_blocking(self.sandbox.close())
