"""Whether the model typed an answer: a literal in `submit()`/`FINAL()` or a variable set to one (`typed_at`), and a typed claim that nothing shown before held (`unevidenced`, policy `unshown_value`). A value the code computed is never judged.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rlmnb._engine.evidence.shown import as_number, found_in, value_claims, words_in
from rlmnb._engine.evidence.steps import output_text, steps_of
from rlmnb._ground.passages import (
    words_of,
)
from rlmnb.events import CodeExecuted, RunFinished, SubCallFinished, Trajectory

__all__ = ["Unevidenced", "typed_at", "unevidenced"]


@dataclass(frozen=True)
class Unevidenced:
    """A short answer the model typed at `typed_turn` that nothing it saw before contained."""

    value: Any
    typed_turn: int


_SUBMITS = ("submit", "FINAL")


def _literal(node: ast.AST) -> tuple[bool, Any]:
    """(True, value) when `node` is a constant written in the code (also -5, int('7'), f'text')."""
    if isinstance(node, ast.Constant):
        return True, node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        ok, value = _literal(node.operand)
        if ok and isinstance(value, int | float) and not isinstance(value, bool):
            return True, -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in node.values):
        return True, "".join(str(v.value) for v in node.values if isinstance(v, ast.Constant))
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("int", "float", "str")
            and len(node.args) == 1 and not node.keywords):
        return _literal(node.args[0])
    return False, None


def _same(value: Any, answer: Any) -> bool:
    number, other = as_number(answer), as_number(value)
    if number is not None and other is not None:
        return math.isclose(number, other, rel_tol=1e-12, abs_tol=1e-12)
    if isinstance(value, str) and isinstance(answer, str):
        return words_of(value) == words_of(answer) and bool(words_of(answer))
    return False


def _distinctive(answer: Any) -> bool:
    """Values unlikely to be in code by chance: numbers of 3+ digits, strings with a digit (ids, keys)."""
    number = as_number(answer)
    if isinstance(answer, str):
        return any(ch.isdigit() for ch in answer) and len(answer.strip()) >= 3
    return number is not None and (not number.is_integer() or abs(number) >= 100)


def _parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError):
        return None


def _submitted_expr(tree: ast.Module) -> list[ast.AST | str]:
    """The argument of each submit()/FINAL() call, or the variable name a FINAL_VAR() call gives."""
    found: list[ast.AST | str] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        if node.func.id in _SUBMITS and node.args:
            found.append(node.args[0])
        elif node.func.id in _SUBMITS and node.keywords:
            found.append(node.keywords[0].value)
        elif node.func.id == "FINAL_VAR" and node.args:
            ok, name = _literal(node.args[0])
            if ok and isinstance(name, str):
                found.append(name.strip().strip("'\""))
    return found


def _assignments(tree: ast.Module, name: str) -> list[tuple[int, ast.AST]]:
    """(line, value) of each `name = value` / `name: T = value` in `tree`, in source order."""
    out: list[tuple[int, ast.AST]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            out.append((node.lineno, node.value))
        elif (isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name)
              and node.target.id == name and node.value is not None):
            out.append((node.lineno, node.value if isinstance(node, ast.AnnAssign) else node))
        elif isinstance(node, ast.For | ast.comprehension) and _binds(node.target, name):
            out.append((getattr(node, "lineno", 0), node))
    return sorted(out, key=lambda item: item[0])


def _binds(target: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(target))


def typed_at(answer: Any, codes: Sequence[tuple[int, str]]) -> int | None:
    """The turn at which the model's code wrote `answer` as a literal, or None when its code computed it.

    `codes` are the run's executed steps (turn, code) in order, the submitting step last.
    """
    trees = [(turn, tree) for turn, code in codes if (tree := _parse(code)) is not None]
    if not trees:
        return None
    turns: list[int] = []
    for expr in _submitted_expr(trees[-1][1]):
        if isinstance(expr, str):
            name: str | None = expr
        else:
            ok, value = _literal(expr)
            if ok and _same(value, answer):
                turns.append(trees[-1][0])
            name = expr.id if isinstance(expr, ast.Name) else None
        if name is None:
            continue
        latest: tuple[int, ast.AST] | None = None  # the variable's latest assignment before the submit
        for turn, tree in trees:
            for _, value_node in _assignments(tree, name):
                latest = (turn, value_node)
        if latest is not None:
            ok, value = _literal(latest[1])
            if ok and _same(value, answer):
                turns.append(latest[0])
    if _distinctive(answer):
        for turn, tree in trees:
            if any(_literal_holds(node, answer) for node in ast.walk(tree)):
                turns.append(turn)
                break
    return min(turns) if turns else None


def _literal_holds(node: ast.AST, answer: Any) -> bool:
    if not isinstance(node, ast.Constant) or isinstance(node.value, bool):
        return False
    if _same(node.value, answer):
        return True
    if isinstance(node.value, str) and isinstance(answer, str | int | float):
        words = words_of(str(answer) if not isinstance(answer, str) else answer)
        return bool(words) and words_in(words, node.value)
    return False


def unevidenced(answer: Any, *, turn: int, trajectory: Trajectory, run_id: str, code: str,
                opening: Sequence[str]) -> Unevidenced | None:
    """Whether a submitted answer must go back to the model as unevidenced (see the module docs).

    Args:
        answer: the submitted value; `code`: the submitting step's code (not yet in the trajectory).
        turn: the submitting turn; `run_id`: the run; `opening`: the texts the model was given (question,
            InputsSummary, later questions and revision requests).
    """
    claims = value_claims(answer)
    if not claims:
        return None
    steps = steps_of(trajectory, run_id)
    typed = typed_at(answer, [*((s.turn, s.code) for s in steps if s.turn < turn), (turn, code)])
    if typed is None:
        return None
    texts: list[str] = list(opening)
    texts.extend(s.text for s in steps if s.turn < typed)
    for event in trajectory.events:
        if isinstance(event, SubCallFinished) and event.reply:  # another model's reading, whenever it came
            texts.append(event.reply)
        elif isinstance(event, CodeExecuted) and event.run_id != run_id:  # child and earlier runs
            texts.append(output_text(event.stdout, event.stderr, event.error))
        elif isinstance(event, RunFinished) and event.run_id != run_id and event.answer is not None:
            texts.append(str(event.answer))
    return None if all(found_in(claim, texts) for claim in claims) else Unevidenced(answer, typed)
