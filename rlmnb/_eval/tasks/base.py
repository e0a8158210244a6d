"""What every task shares: the `Instance` record, input sizes, seeds and the task registry.

A task is a seeded generator plus a scorer. `generate(size, seed, index)` must return the same
instance for the same arguments on any machine (numpy's PCG64 streams are stable), so results from
different runs, models and methods are comparable instance by instance.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from rlmnb._ground.errors import ConfigError

__all__ = ["FAMILY_NAMES", "MAX_SIZE", "MIN_SIZE", "TASK_NAMES", "Instance", "Task", "expand_tasks", "format_size",
           "generate", "get_task", "instance_seed", "parse_size"]

MIN_SIZE = 4_000          # tokens: below this the tasks degenerate (too few records to aggregate)
MAX_SIZE = 20_000_000     # tokens: ~80 MB of text, well past the 10M the suite is built for
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*$")


def parse_size(text: str | int) -> int:
    """Tokens from "32k", "1m", "1.5M" or a plain number; ConfigError with the accepted forms otherwise."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        match = _SIZE.match(str(text))
        if not match:
            raise ConfigError(f"size {text!r} is not a token count: write it like 8k, 256k, 1m or 32000.")
        scale = {"": 1, "k": 1_000, "m": 1_000_000}[match.group(2).lower()]
        value = int(float(match.group(1)) * scale)
    if not MIN_SIZE <= value <= MAX_SIZE:
        raise ConfigError(f"size {text!r} is outside {format_size(MIN_SIZE)}..{format_size(MAX_SIZE)} tokens; "
                         f"pick a size in that range.")
    return value


def format_size(tokens: int) -> str:
    """The short form of a token count: 8000 -> "8k", 1000000 -> "1m" (round figures only)."""
    if tokens >= 1_000_000 and tokens % 100_000 == 0:
        return f"{tokens / 1_000_000:g}m"
    if tokens >= 1_000 and tokens % 100 == 0:
        return f"{tokens / 1_000:g}k"
    return str(tokens)


def instance_seed(task: str, size: int, seed: int, index: int) -> list[int]:
    """Entropy for numpy's SeedSequence: stable across processes (no Python hash randomisation)."""
    return [seed, zlib.crc32(task.encode()), size, index]


@dataclass(frozen=True)
class Instance:
    """One question over generated inputs, with its ground truth.

    `inputs` maps input names to text (bound as `inputs[name]` in the sandbox); `answer` is the JSON-able
    ground truth; `kind` the question family (e.g. "count"); `tokens` the estimated size of the inputs;
    `meta` JSON-able facts about the instance (needle position, record count...). `data` holds the
    generator's structured truth (record labels, entity tables) for oracles and tests; it is never
    written out.
    """

    task: str
    size: int
    index: int
    seed: int
    question: str
    inputs: Mapping[str, str] = field(repr=False)
    answer: Any
    kind: str
    tokens: int
    meta: Mapping[str, Any] = field(default_factory=dict)
    data: Any = field(default=None, repr=False, compare=False)

    @property
    def chars(self) -> int:
        return sum(len(v) for v in self.inputs.values())

    @property
    def text(self) -> str:
        """The inputs as one text, for methods that take one: `context` alone, else each input under a
        `=== name ===` header."""
        if set(self.inputs) == {"context"}:
            return self.inputs["context"]
        return "\n\n".join(f"=== {name} ===\n{body}" for name, body in self.inputs.items())

    def score(self, prediction: Any) -> float:
        """The task's score of `prediction` for this instance, in [0, 1]."""
        return get_task(self.task).score(self, prediction)

    def to_dict(self) -> dict[str, Any]:
        """Everything but the input bodies and `data` (the inputs are regenerated from task/size/seed/index)."""
        return {"task": self.task, "size": self.size, "index": self.index, "seed": self.seed,
                "question": self.question, "answer": self.answer, "kind": self.kind, "tokens": self.tokens,
                "chars": self.chars, "meta": dict(self.meta)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Instance:
        """Regenerate the instance a `to_dict` record names (its inputs are not stored)."""
        return get_task(str(data["task"])).generate(int(data["size"]), seed=int(data["seed"]),
                                                    index=int(data["index"]))


class Task(Protocol):
    """A seeded generator and its scorer. `description` says how the answer can and cannot be found."""

    name: str
    description: str

    def generate(self, size: int, *, seed: int = 0, index: int = 0) -> Instance: ...

    def score(self, instance: Instance, prediction: Any) -> float: ...


_REGISTRY: dict[str, str] = {
    "niah": "rlmnb._eval.tasks.facts:NIAH",
    "oolong": "rlmnb._eval.tasks.oolong:OOLONG",
    "oolong_pairs": "rlmnb._eval.tasks.oolong:OOLONG_PAIRS",
    "multihop": "rlmnb._eval.tasks.facts:MULTIHOP",
}
TASK_NAMES = tuple(_REGISTRY)
# Task families named "<family>:<argument>" (`ruler:vt`, `jsonl:PATH`, `oolong_real:PATH`...): a factory each
_FAMILIES: dict[str, str] = {
    "ruler": "rlmnb._eval.tasks.ruler:ruler_task",
    "jsonl": "rlmnb._eval.tasks.jsonl:jsonl_task",
    "oolong_synth": "rlmnb._eval.tasks.published:oolong_synth",
    "oolong_real": "rlmnb._eval.tasks.published:oolong_real",
    "longbench_v2": "rlmnb._eval.tasks.published:longbench_v2",
    "browsecomp_plus": "rlmnb._eval.tasks.published:browsecomp_plus",
    "ordinary": "rlmnb._eval.tasks.ordinary:ordinary_task",
}
FAMILY_NAMES = tuple(_FAMILIES)


def get_task(name: str) -> Task:
    """The task called `name`; ConfigError listing the task names otherwise."""
    import importlib

    family, colon, argument = str(name).partition(":")
    if family.strip().lower() in _FAMILIES:
        module, _, attr = _FAMILIES[family.strip().lower()].partition(":")
        made: Task = getattr(importlib.import_module(module), attr)(argument)
        return made
    target = _REGISTRY.get(str(name).strip().lower().replace("-", "_"))
    if target is None:
        raise ConfigError(f"unknown task {name!r}: choose from {', '.join(TASK_NAMES)}, or a family: "
                          f"{', '.join(f + ':...' for f in FAMILY_NAMES)}.")
    module, _, attr = target.partition(":")
    task: Task = getattr(importlib.import_module(module), attr)
    return task


def expand_tasks(names: list[str] | tuple[str, ...]) -> list[str]:
    """Task names with "all" (the suite) and "<family>:all" (every task of a family) spelled out."""
    import importlib

    out: list[str] = []
    for name in names:
        family, colon, argument = name.partition(":")
        if name.strip().lower() == "all":
            out += TASK_NAMES
        elif colon and argument.strip().lower() == "all" and family.strip().lower() in _FAMILIES:
            module = importlib.import_module(_FAMILIES[family.strip().lower()].partition(":")[0])
            members = getattr(module, "NAMES", ())
            out += [f"{family.strip().lower()}:{n}" for n in members] if members else [name]
        else:
            out.append(name)
    return out


def generate(task: str, size: int | str, *, seed: int = 0, index: int = 0) -> Instance:
    """Instance `index` of `task` at `size` tokens (e.g. "32k") for `seed`."""
    return get_task(task).generate(parse_size(size), seed=seed, index=index)
