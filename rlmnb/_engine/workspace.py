"""A run's inputs and primitives in the notebook: what "copy code to a new cell" binds so a turn's code runs
where it is pasted.

`RunResult.workspace()` (or `workspace_of(trajectory)` for a saved run) gives `inputs`, `sql`,
`llm_query`, `llm_query_batched`, `submit` and `FINAL`, with the same views the sandbox gave the model
(a file table is the same DuckDB relation, `sql()` the same engine). Sub-calls are answered from the
run's record, by prompt, so pasted code costs nothing and gives what the model saw; a prompt the run
never sent fails with a sentence saying how to go live. `live=True` sends every sub-call to the sub-model
instead (the one passed as `sub_model=`, else the run's, by its recorded name).

Inputs come from the run when it is this kernel's; for a saved run, file inputs are re-read from their
recorded paths and in-memory ones must be passed again (`workspace(data=df)`), as for a replay.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rlmnb._engine.cache import prompt_sha
from rlmnb._ground.config import RLMConfig
from rlmnb.events import RunStarted, SubCallFinished, SubCallStarted, Trajectory

__all__ = ["PRIMITIVES", "Workspace", "workspace_of"]

# the names a turn's code may use that a pasted cell needs bound; the extension's header binds those a turn
# uses, in this order (extension/src/format.ts WORKSPACE_NAMES)
PRIMITIVES = ("inputs", "sql", "llm_query", "llm_query_batched", "submit", "FINAL")


class Workspace:
    """The inputs and primitives of one run, bound in the notebook. `take(*names)` gives several at once."""

    def __init__(self, trajectory: Trajectory, values: Mapping[str, Any], *, live: bool = False,
                 sub_model: Any = None) -> None:
        from rlmnb._sandbox.local import LazyInputs
        from rlmnb.inputs import bind_inputs
        from rlmnb.inputs._tables.duck import SQLEngine

        start = _start(trajectory)
        fields, _ = bind_inputs(dict(values), RLMConfig())
        self.inputs = LazyInputs(fields)
        self.sql = SQLEngine({"inputs": self.inputs})
        self.live = live
        self._sub_model = sub_model if sub_model is not None else start.sub_model
        self._lm: Any = None
        self._record: dict[str, tuple[str | None, str | None]] = {}
        finished = {e.call_id: e for e in trajectory.of(SubCallFinished)}
        for started in trajectory.of(SubCallStarted):
            done = finished.get(started.call_id)
            if done is not None:
                self._record.setdefault(started.prompt_sha, (done.reply, done.error))

    def take(self, *names: str) -> tuple[Any, ...]:
        """The named primitives, in the order asked: `inputs, sql = run.workspace().take("inputs", "sql")`."""
        unknown = [n for n in names if n not in PRIMITIVES]
        if unknown:
            raise AttributeError(f"the workspace has no {', '.join(map(repr, unknown))}; it has {', '.join(PRIMITIVES)}.")
        return tuple(getattr(self, n) for n in names)

    def llm_query(self, prompt: str) -> str:
        """The sub-model's answer to `prompt`: from the run's record, or sent when the workspace is live."""
        if self.live:
            return self._send(prompt)
        recorded = self._record.get(prompt_sha(str(prompt)))
        if recorded is None:
            raise LookupError(f"the run never sent this prompt ({len(str(prompt)):,} chars, not in its record); "
                              f"use .workspace(live=True) to send new prompts to the sub-model.")
        reply, error = recorded
        if error is not None:
            raise RuntimeError(f"in the run, this sub-call failed: {error}")
        return reply or ""

    def llm_query_batched(self, prompts: Sequence[str]) -> list[str]:
        """`llm_query` over each prompt, in order (a failed one gives its error text, as in the sandbox)."""
        out: list[str] = []
        for prompt in prompts:
            try:
                out.append(self.llm_query(prompt))
            except RuntimeError as exc:
                out.append(f"[error] {exc}")
        return out

    def submit(self, value: Any = None, **fields: Any) -> Any:
        """In the notebook, submitting ends nothing: it gives the value back (the cell shows it)."""
        return fields if value is None and fields else value

    FINAL = submit

    def _send(self, prompt: str) -> str:
        from rlmnb._ground.blocking import run_coroutine_blocking
        from rlmnb._models.resolve import resolve_model

        if self._lm is None:
            self._lm = resolve_model(self._sub_model, role="sub_model")
        completion = run_coroutine_blocking(self._lm.acomplete([{"role": "user", "content": str(prompt)}]))
        return str(completion.text)

    def __repr__(self) -> str:
        return (f"Workspace(inputs={', '.join(self.inputs) or 'none'}; sub-calls "
                f"{'sent to ' + str(getattr(self._sub_model, 'name', self._sub_model)) if self.live else 'from the record'})")


def workspace_of(trajectory: Trajectory | str | Path, fields: Iterable[Any] = (), *, live: bool = False,
                 sub_model: Any = None, **values: Any) -> Workspace:
    """The workspace of a run: its bound `fields` when it ran in this kernel, else file inputs re-read from
    their recorded paths; `values` bind (or replace) inputs by name.

    Raises:
        rlmnb.ConfigError: an input that was an in-memory value is not passed again.
    """
    from rlmnb._ground.errors import ConfigError

    record = trajectory if isinstance(trajectory, Trajectory) else Trajectory.load(trajectory)
    bound: dict[str, Any] = {f.name: f.source for f in fields}
    missing: list[str] = []
    for info in _start(record).inputs:
        name = str(info.get("name"))
        if name in values or name in bound:
            continue
        path = info.get("path")
        if path and Path(str(path)).exists():
            bound[name] = Path(str(path))
        else:
            missing.append(name)
    if missing:
        names = ", ".join(missing)
        raise ConfigError(f"The run's input(s) {names} were in-memory values, not saved with the run; pass them "
                          f"again: .workspace({', '.join(f'{n}=...' for n in missing)}).")
    return Workspace(record, {**bound, **values}, live=live, sub_model=sub_model)


def _start(trajectory: Trajectory) -> RunStarted:
    starts = trajectory.of(RunStarted)
    if not starts:
        from rlmnb._ground.errors import ConfigError

        raise ConfigError("That trajectory has no run_started event; it is not a complete rlmnb record.")
    return starts[0]
