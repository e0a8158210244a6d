"""The house's floors: the import-linter contracts in .importlinter hold, and they catch what they should.

The first test runs `lint-imports` itself over this checkout. The others add one import to the
real import graph and check that a contract breaks: imports up the floors, between siblings of one
floor, a circle inside a package, and a package that was never given a floor.
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
    ("rlmnb._engine.runs", "rlmnb._api"),             # the engine never builds a run from the API
    ("rlmnb._engine.loop", "rlmnb.views._fold"),      # the engine never renders
    ("rlmnb._guards.quotes", "rlmnb._engine.loop"),  # guards never call the loop
    ("rlmnb._models.base", "rlmnb._engine.subcalls"),  # the model seam knows nothing of sub-calls
    ("rlmnb.inputs._records", "rlmnb._sandbox.base"),  # inputs are bound below where code runs
    ("rlmnb._ground.config", "rlmnb.inputs"),         # the ground knows nothing of a run
    ("rlmnb.testing.scripted", "rlmnb._notebook.magic"),  # scripted models know no front end
    ("rlmnb._sandbox.base", "rlmnb._sandbox.kernel.sandbox"),  # the sandbox protocol is its bottom floor
    ("rlmnb._engine.replies", "rlmnb._engine.loop"),  # reading a reply knows nothing of the loop
    ("rlmnb._engine.turn", "rlmnb._engine.loop"),     # one turn knows nothing of the loop around it
    ("rlmnb._engine.subcalls", "rlmnb._engine.runs"),  # sub-calls reach child runs only through ChildRunner
    ("rlmnb.inputs._tables.duck", "rlmnb.inputs._families.relations"),  # the table engine knows no family
    ("rlmnb.inputs._records", "rlmnb.inputs._previews"),  # the records render nothing
])
def test_an_import_up_the_floors_breaks_the_layers(graph: grimp.ImportGraph, importer: str, imported: str) -> None:
    broken = broken_contracts(with_import(graph, importer, imported))
    assert any("is layered" in name for name in broken), broken


@pytest.mark.parametrize(("importer", "imported"), [
    ("rlmnb._models.litellm", "rlmnb._sandbox.base"),  # models and sandbox know each other only by Protocols
    ("rlmnb.views", "rlmnb._telemetry"),
    ("rlmnb._notebook.magic", "rlmnb._eval.command"),
])
def test_siblings_on_one_floor_stay_independent(graph: grimp.ImportGraph, importer: str, imported: str) -> None:
    assert broken_contracts(with_import(graph, importer, imported))


def test_a_circle_inside_a_package_breaks_the_acyclic_contract(graph: grimp.ImportGraph) -> None:
    assert graph.direct_import_exists(importer="rlmnb._guards.rules", imported="rlmnb._guards.quotes")
    broken = broken_contracts(with_import(graph, "rlmnb._guards.quotes", "rlmnb._guards.rules"))
    assert broken == ["no circle between the modules of any package of rlmnb"]


def test_a_package_without_a_floor_breaks_the_layers(graph: grimp.ImportGraph) -> None:
    changed = copy.deepcopy(graph)
    changed.add_module("rlmnb.newroom")
    broken = broken_contracts(changed)
    assert len(broken) == 1 and broken[0].startswith("rlmnb is layered")


def test_imports_inside_functions_are_counted(graph: grimp.ImportGraph) -> None:
    """runs.py imports inputs only inside a function: the graph the contracts check still has it."""
    details = graph.get_import_details(importer="rlmnb._engine.runs", imported="rlmnb.inputs")
    assert details, "the function-level import of rlmnb.inputs in rlmnb._engine.runs is missing from the graph"
    source = (ROOT / "rlmnb" / "_engine" / "runs.py").read_text(encoding="utf-8").splitlines()
    assert all(source[d["line_number"] - 1].startswith("    ") for d in details)
