"""One public surface: every module declares `__all__`, no module imports another's `_` names, the
public modules export what they define, and at most a handful of modules sit directly in rlmnb/."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

import rlmnb

PACKAGE = Path(rlmnb.__file__).resolve().parent
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "labextension" not in p.parts)
PUBLIC = ["rlmnb", "rlmnb.events", "rlmnb.views", "rlmnb.inputs", "rlmnb.evaluation",
          *(f"rlmnb.testing.{p.stem}" for p in sorted((PACKAGE / "testing").glob("[a-z]*.py")))]


def declares_all(tree: ast.Module) -> bool:
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            return True
    return False


def test_every_module_declares_all_and_imports_no_private_name() -> None:
    missing, private = [], []
    for path in MODULES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if not declares_all(tree):
            missing.append(str(path.relative_to(PACKAGE)))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rlmnb"):
                private += [f"{path.name}: {node.module}.{a.name}" for a in node.names
                            if a.name.startswith("_") and not a.name.startswith("__")]
    assert missing == [] and private == []


@pytest.mark.parametrize("name", PUBLIC)
def test_a_public_module_exports_what_it_defines(name: str) -> None:
    module = importlib.import_module(name)
    exported = set(module.__all__)
    defined = {n for n, v in vars(module).items() if not n.startswith("_") and not inspect.ismodule(v)
               and getattr(v, "__module__", name) == name and (inspect.isclass(v) or inspect.isfunction(v))}
    assert defined <= exported, sorted(defined - exported)
    assert all(hasattr(module, n) for n in exported)


def test_few_modules_sit_directly_in_the_package() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) < 15, top
    assert all(n.startswith("_") or n in ("events.py", "evaluation.py") for n in top), top


def test_the_guards_are_exported_from_rlmnb() -> None:
    assert {"RuleBased", "LLMJudge", "QuotesFound"} <= set(rlmnb.__all__)
    assert rlmnb.QuotesFound.__module__.startswith("rlmnb._guards")
