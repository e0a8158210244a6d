"""A long-context task suite: seeded generators and scorers from about 8K to 10M tokens.

    >>> from rlmnb._eval.tasks import generate
    >>> instance = generate("oolong", "32k", seed=0, index=3)
    >>> instance.question, instance.answer, instance.score(instance.answer)

Tasks (each module's docstring says how its answer can and cannot be found without reading):
`niah` (one needle among distractor needles, exact match), `oolong` (aggregates over labels that need
reading, `0.75 ** |error|` or exact), `oolong_pairs` (record pairs by a predicate over two labels, F1)
and `multihop` (a chain of two or three documents, exact match on the final entity).
"""

from __future__ import annotations

from rlmnb._eval.tasks.base import TASK_NAMES, Instance, Task, format_size, generate, get_task, parse_size

__all__ = ["TASK_NAMES", "Instance", "Task", "format_size", "generate", "get_task", "parse_size"]
