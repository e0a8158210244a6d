"""The house's floors: the import-linter contracts in .importlinter hold, and they catch what they should.

The first test runs `lint-imports` itself over this checkout. The others add one import to the
real import graph and check that a contract breaks: the four imports that once ran back up the
floors, an engine module reaching for a view, a circle, and a module that was never given a floor.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import grimp
import pytest
from importlinter.api import read_configuration
from importlinter.contracts.acyclic_siblings import AcyclicSiblingsContract
from importlinter.contracts.layers import LayersContract

import rlmnb

ROOT = Path(rlmnb.__file__).resolve().parent.parent
CONFIG = ROOT / ".importlinter"
CONTRACT_TYPES: dict[str, Any] = {"layers": LayersContract, "acyclic_siblings": AcyclicSiblingsContract}


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("rlmnb", cache_dir=None)


def broken_contracts(graph: grimp.ImportGraph) -> list[str]:
    """Names of the contracts in .importlinter that `graph` breaks."""
    options = read_configuration(str(CONFIG))
    broken = []
    for contract_options in options["contracts_options"]:
        contract = CONTRACT_TYPES[contract_options["type"]](
            name=contract_options["name"], session_options=options["session_options"],
            contract_options=contract_options)
        if not contract.check(copy.deepcopy(graph), verbose=False).kept:
            broken.append(contract_options["name"])
    return broken


def with_import(graph: grimp.ImportGraph, importer: str, imported: str) -> grimp.ImportGraph:
    changed = copy.deepcopy(graph)
    changed.add_import(importer=importer, imported=imported, line_number=1, line_contents=f"import {imported}")
    return changed


def test_lint_imports_keeps_every_contract() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    assert lint.exists(), "import-linter is not installed: pip install -e '.[dev]'"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([str(lint), "--config", str(CONFIG), "--no-cache"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "kept, 0 broken" in done.stdout


def test_the_real_graph_breaks_nothing(graph: grimp.ImportGraph) -> None:
    assert broken_contracts(graph) == []


@pytest.mark.parametrize(("importer", "imported"), [
    ("rlmnb.runs", "rlmnb.api"),            # runs needed Session: it now lives in tree.py
    ("rlmnb.replay", "rlmnb.api"),          # replay needed RLM: RLM.replay now builds the run
    ("rlmnb.recursion", "rlmnb.runs"),      # children needed execute_run: it is handed to them
    ("rlmnb.models", "rlmnb.litellm_lm"),   # resolve_model picked LiteLLM: it now lives in lm_factory.py
    ("rlmnb.loop", "rlmnb.views"),          # the engine never renders
    ("rlmnb.views.fold", "rlmnb.views.html"),
    ("rlmnb.sandbox.base", "rlmnb.sandbox.kernel"),
])
def test_an_import_up_the_floors_breaks_the_layers(graph: grimp.ImportGraph, importer: str, imported: str) -> None:
    broken = broken_contracts(with_import(graph, importer, imported))
    assert any("is layered" in name for name in broken), broken


def test_siblings_on_one_floor_stay_independent(graph: grimp.ImportGraph) -> None:
    assert broken_contracts(with_import(graph, "rlmnb.views", "rlmnb.telemetry"))


def test_a_circle_inside_an_unlayered_package_breaks_the_acyclic_contract(graph: grimp.ImportGraph) -> None:
    assert graph.direct_import_exists(importer="rlmnb.testing.scenarios", imported="rlmnb.testing.generators")
    broken = broken_contracts(with_import(graph, "rlmnb.testing.generators", "rlmnb.testing.scenarios"))
    assert broken == ["no circle between the modules of any package of rlmnb"]


def test_a_module_without_a_floor_breaks_the_layers(graph: grimp.ImportGraph) -> None:
    changed = copy.deepcopy(graph)
    changed.add_module("rlmnb.newroom")
    assert broken_contracts(changed) == ["rlmnb is layered: front ends > views > engine > sandbox and models > records"]


def test_imports_inside_functions_are_counted(graph: grimp.ImportGraph) -> None:
    """runs.py imports inputs only inside `refine`: the graph the contracts check still has it."""
    details = graph.get_import_details(importer="rlmnb.runs", imported="rlmnb.inputs")
    assert details, "the function-level import of rlmnb.inputs in rlmnb.runs is missing from the graph"
    source = (ROOT / "rlmnb" / "runs.py").read_text(encoding="utf-8").splitlines()
    assert all(source[d["line_number"] - 1].startswith("    ") for d in details)
