"""A Dask input is no way back into the user's process (issue 43), tried as an attacker would.

The user's cluster is a `LocalCluster(processes=False)`: its scheduler lives in this test process and listens
on TCP, as a notebook's would. A scripted root whose code reaches for that scheduler (the session's client,
or a client of its own to the scheduler's address) gets an error as its observation and the run carries
on; nothing ran in this process. The same run's frames (from Parquet, from CSV, persisted) still compute
right in the sandbox. With `allow_model_code_on_dask_cluster=True` the kernel is the cluster's client, as its
name says: model code then runs in this process.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from distributed import Client, LocalCluster
from sandbox_support import code, observations

from rlmnb import RLM
from rlmnb.testing import ScriptedLM

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("stop_the_spare")]
CANARY = "RLMNB_DASK_CANARY"
SALES = pd.DataFrame({"store": np.arange(3_000) % 5, "amount": np.arange(3_000, dtype=float)})
TRUTH = f"3000 {int(SALES.amount.sum())} 3000 {int(SALES.groupby('store').amount.sum().max())} {sum(range(500))}"


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, protocol="tcp://",
                      dashboard_address=":0") as c, Client(c):
        yield c


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sales")
    frame = SALES
    for i in range(3):
        part = frame.iloc[i * 1_000:(i + 1) * 1_000]
        part.to_parquet(folder / f"part-{i}.parquet")
        part.to_csv(folder / f"part-{i}.csv", index=False)
    return folder


def frames(folder: Path) -> dict[str, Any]:
    """One frame of each crossing: Parquet and CSV (their graphs cross) and a persisted one (exported)."""
    kept = dd.from_pandas(pd.DataFrame({"v": np.arange(500)}), npartitions=4).persist()
    return {"sales": dd.read_parquet(str(folder / "*.parquet")), "raw": dd.read_csv(str(folder / "*.csv")),
            "kept": kept}


COMPUTE = code("print(len(inputs['sales']), int(inputs['sales'].amount.sum().compute()), len(inputs['raw']),\n"
               "      int(inputs['raw'].groupby('store').amount.sum().compute().max()), int(inputs['kept'].v.sum()"
               ".compute()))")


def test_model_code_cannot_reach_the_users_scheduler_and_the_frames_still_compute(
        cluster: LocalCluster, files: Path) -> None:
    address = cluster.scheduler.address
    assert address.startswith("tcp://")
    session = code(
        "try:\n    from distributed import get_client\n"
        f"    get_client().run_on_scheduler(lambda: __import__('os').environ.__setitem__({CANARY!r}, 'session'))\n"
        "    print('reached')\nexcept Exception as exc:\n    print('refused', type(exc).__name__)")
    own = code(  # a client of its own: the exception is the observation
        f"import distributed\nc = distributed.Client({address!r}, timeout=3)\n"
        f"c.run_on_scheduler(lambda: __import__('os').environ.__setitem__({CANARY!r}, 'own'))\nprint('reached')")
    root = ScriptedLM([session, own, COMPUTE, code("submit('done')")], name="root")
    clients = set(cluster.scheduler.clients)
    result = RLM(root, ScriptedLM(lambda m: "x", name="sub"), sandbox="kernel", evidence_check=False).run(
        "Total sales?", **frames(files))
    assert result.answer == "done", result.error  # the run carried on
    seen = observations(root)
    assert seen[0].strip().endswith("refused ValueError")  # the kernel has no client: none was made for it
    assert "reached" not in seen[1] and ("OSError" in seen[1] or "TimeoutError" in seen[1])
    assert CANARY not in os.environ and set(cluster.scheduler.clients) == clients  # nothing ran here
    assert TRUTH in seen[2]


def test_with_the_opt_in_model_code_runs_on_the_cluster_which_is_this_process(
        cluster: LocalCluster, files: Path) -> None:
    probe = code("inputs['sales'].npartitions  # the kernel's client connects when the input is first used\n"
                 "from distributed import get_client\nprint('scheduler pid', get_client().run_on_scheduler("
                 "lambda: __import__('os').getpid()))")
    root = ScriptedLM([probe, COMPUTE, code("submit('done')")], name="root")
    result = RLM(root, ScriptedLM(lambda m: "x", name="sub"), sandbox="kernel", evidence_check=False,
                 allow_model_code_on_dask_cluster=True).run("Total sales?", **frames(files))
    assert result.answer == "done", result.error
    seen = observations(root)
    assert f"scheduler pid {os.getpid()}" in seen[0]  # what the setting's name warns of
    assert TRUTH in seen[1]
