"""Dask inputs on a real `distributed.LocalCluster` with two worker processes (one per module).

Summaries come from metadata and the first partition (never the whole frame); by default the kernel sandbox
computes a frame itself (its graph on Dask's threaded scheduler, or the host's export of a persisted frame)
and never reaches the cluster; only with `allow_model_code_on_dask_cluster` does it connect its own client to
the user's scheduler, so `.compute()` runs on the cluster's workers; sub-calls stay on the host under the
run's one budget; bad clusters fail with one sentence before any model call. The attacks on the boundary
are in tests/sandbox/test_dask_boundary.py.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import socket
import sys
from collections.abc import Iterator
from multiprocessing import resource_tracker
from pathlib import Path
from typing import Any

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from distributed import Client, LocalCluster
from sandbox_support import KINDS, EchoHost, code, run_bound

from rlmnb import RLM, InputError
from rlmnb._ground.config import RLMConfig
from rlmnb._sandbox import create_sandbox
from rlmnb.inputs import bind_inputs
from rlmnb.inputs._families import dask_frames
from rlmnb.testing import ScriptedLM

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("stop_the_spare")]
ON_CLUSTER = RLMConfig(allow_model_code_on_dask_cluster=True)


async def run_opted_in(kind: str, values: dict[str, Any], body: str) -> str:
    """What `body` prints in a fresh sandbox of `kind` whose inputs were bound with the cluster opt-in."""
    fields, _ = bind_inputs(values, ON_CLUSTER)
    sandbox = create_sandbox(kind)
    try:
        await sandbox.start(EchoHost(asyncio.get_running_loop()))
        await sandbox.bind(fields)
        result = await sandbox.execute(body, 120)
        assert result.error is None, result.error
        return result.stdout
    finally:
        await sandbox.close()


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    # Worker processes are spawned, which reads __main__.__spec__; an IPython shell made by an earlier test
    # leaves a __main__ without one (a notebook kernel's __main__ has it).
    main = sys.modules["__main__"]
    if not hasattr(main, "__spec__"):
        main.__spec__ = None
    try:
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")
        try:
            with Client(cluster) as c:
                yield c
        finally:
            cluster.close()
    finally:
        resource_tracker._resource_tracker._stop()  # type: ignore[attr-defined]  # started for the workers


@pytest.fixture(scope="module")
def events_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("events")
    n = 60_000
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"user": rng.integers(0, 50, n), "amount": rng.integers(1, 100, n).astype(float),
                          "kind": np.array(["view", "click", "buy"])[rng.integers(0, 3, n)]})
    for i in range(4):
        frame.iloc[i * n // 4:(i + 1) * n // 4].to_parquet(folder / f"part-{i}.parquet")
    return folder


def events(path: Path) -> Any:
    return dd.read_parquet(str(path / "*.parquet"))


# ---- summaries ----------------------------------------------------------------------------------------------
def test_a_dask_frame_is_summarised_from_metadata_and_its_first_partition(client: Client, events_path: Path) -> None:
    fields, summary = bind_inputs({"events": events(events_path)}, RLMConfig())
    text = summary.text
    assert 'inputs["events"]: dask_frame (dask.DataFrame), 60,000 rows x 3 columns' in text  # Parquet footers
    assert "Dask DataFrame, 4 partitions, not computed" in text and "on the cluster" not in text
    assert "columns: user int64, amount float64, kind " in text
    first = pd.read_parquet(events_path / "part-0.parquet").iloc[0]
    assert f"user | amount | kind\n    {first.user} | {first.amount} | {first.kind}" in text
    assert fields[0].endpoints == () and fields[0].plan == {"crossing": "graph"}  # the sandbox computes it
    assert fields[0].read_paths == (str(events_path),)  # with Dask's own readers, over these files
    opted = bind_inputs({"events": events(events_path)}, ON_CLUSTER)[0][0]
    host, port = client.scheduler.address.split("://")[1].rsplit(":", 1)
    assert opted.endpoints == (f"{host}:{port}",) and opted.plan == {"crossing": "cluster"}
    assert "runs it on the cluster" in opted.info.detail


def test_a_filtered_frame_has_an_unknown_row_count_and_known_divisions_are_shown(client: Client) -> None:
    frame = dd.from_pandas(pd.DataFrame({"v": np.arange(1000)}), npartitions=4)
    text = bind_inputs({"big": frame[frame.v > 10], "all": frame}, RLMConfig())[1].text
    big, whole = text.split('inputs["all"]')
    assert "rows unknown x 1 column" in big and "row count unknown (counting would compute every partition)" in big
    assert "1,000 rows x 1 column" in whole and "index divisions known: 0 … 999" in whole


def test_describing_computes_only_the_first_partition(client: Client) -> None:
    def part(i: int) -> pd.DataFrame:
        if i > 0:
            raise RuntimeError(f"partition {i} was computed")
        return pd.DataFrame({"i": [i, i]})

    frame = dd.from_map(part, range(4), meta=pd.DataFrame({"i": pd.Series([], dtype="int64")}))
    text = bind_inputs({"lazy": frame}, RLMConfig())[1].text
    assert "4 partitions" in text and "rows unknown" in text


# ---- where .compute() runs ----------------------------------------------------------------------------------
WHERE = ("import os\ne = inputs['events']\n"
         "print(e.groupby('user').size().nlargest(3).compute().to_dict())\n"
         "print(sorted(set(e.map_partitions(lambda p: p.assign(pid=os.getpid())).pid.compute())), os.getpid())")


async def test_by_default_the_kernel_computes_the_frame_itself_and_never_the_cluster(
        client: Client, events_path: Path) -> None:
    gc.collect()
    before = set(client.list_datasets())
    out, shipped = await run_bound("kernel", {"events": events(events_path)}, WHERE)
    top, pids = out.splitlines()
    truth = pd.read_parquet(events_path).groupby("user").size().nlargest(3).to_dict()
    assert top == str(truth)
    computed, kernel = pids.rsplit(" ", 1)
    assert eval(computed) == [int(kernel)]  # noqa: S307 - our own printed list: the sandbox's own threads
    assert not set(client.run(os.getpid).values()) & {int(kernel)} and int(kernel) != os.getpid()
    assert shipped == 0 and set(client.list_datasets()) == before  # the graph crossed; nothing was published


@pytest.mark.parametrize("kind", KINDS)
async def test_with_the_opt_in_sandbox_code_computes_on_the_clusters_workers(
        kind: str, client: Client, events_path: Path) -> None:
    out = await run_opted_in(kind, {"events": events(events_path)}, WHERE)
    top, pids = out.splitlines()
    truth = pd.read_parquet(events_path).groupby("user").size().nlargest(3).to_dict()
    assert top == str(truth)
    workers = set(client.run(os.getpid).values())
    computed = eval(pids.rsplit(" ", 1)[0])  # noqa: S307 - our own printed list
    assert set(computed) <= workers and os.getpid() not in computed


async def test_a_persisted_frame_is_computed_by_the_host_and_crosses_as_arrow_with_its_partitions(
        client: Client) -> None:
    source = pd.DataFrame({"v": np.arange(1_000), "w": np.arange(1_000) % 7}, index=np.arange(1_000) * 2)
    frame = dd.from_pandas(source, npartitions=5).persist()
    fields, _ = bind_inputs({"p": frame}, RLMConfig())
    assert fields[0].plan == {"crossing": "export"} and fields[0].endpoints == ()
    body = ("p = inputs['p']\nprint(p.npartitions, len(p), int(p.v.sum().compute()), list(p.divisions))\n"
            "print(p.groupby('w').v.sum().compute().sort_index().tolist(), int(p.index.max().compute()))")
    out, shipped = await run_bound("kernel", {"p": frame}, body)
    assert out.splitlines() == [f"5 1000 {source.v.sum()} {list(frame.divisions)}",
                                f"{source.groupby('w').v.sum().tolist()} 1998"]
    assert shipped > 0  # the host's export, not the cluster, fed the sandbox


def test_a_persisted_frame_too_large_to_copy_stops_the_run_before_any_model_call(
        client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dask_frames, "MAX_EXPORT_BYTES", 1_000)
    frame = dd.from_pandas(pd.DataFrame({"v": np.arange(10_000)}), npartitions=2).persist()
    root = ScriptedLM([code("print(1)")], name="root")
    result = RLM(root, ScriptedLM(lambda m: "x", name="sub"), sandbox="kernel").run("?", big=frame)
    assert result.status == "error" and root.requests == []
    assert result.error is not None and "Input 'big'" in result.error
    assert "allow_model_code_on_dask_cluster=True" in result.error  # the way out is named


@pytest.mark.parametrize("kind", KINDS)
async def test_the_users_collection_is_never_changed(kind: str, client: Client, events_path: Path) -> None:
    frame = events(events_path)
    body = "e = inputs['events']\ne['double'] = e.amount * 2\nprint(list(e.columns))"
    out, _ = await run_bound(kind, {"events": frame}, body)
    assert out == "['user', 'amount', 'kind', 'double']\n"
    assert list(frame.columns) == ["user", "amount", "kind"]


@pytest.mark.integration
async def test_without_a_client_the_graph_runs_on_dasks_default_scheduler_in_the_kernel(
        events_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dask_frames, "user_client", lambda: None)
    body = ("import distributed\ntry:\n    distributed.get_client()\n    print('client')\nexcept ValueError:\n"
            "    print('no client')\nprint(int(inputs['events'].amount.sum().compute()))")
    out, shipped = await run_bound("kernel", {"events": events(events_path)}, body)
    assert out == f"no client\n{int(pd.read_parquet(events_path).amount.sum())}\n"
    assert shipped == 0


def test_sub_calls_stay_on_the_host_under_the_one_budget(client: Client, events_path: Path) -> None:
    pick = code("e = inputs['events']\nbig = e[e.amount > 97].head(5, npartitions=-1)\nprint(len(big))")
    over = code("try:\n    llm_query_batched([f'user {u}?' for u in big.user])\nexcept Exception as exc:\n"
                "    print(type(exc).__name__)")
    fit = code("print(llm_query_batched([f'user {u}?' for u in big.user[:3]]))")
    root = ScriptedLM([pick, over, fit, code("submit('ok')")], name="root")
    sub = ScriptedLM(lambda m: "fine", name="sub")
    result = RLM(root, sub, sandbox="kernel", max_llm_calls=3, evidence_check=False).run(
        "?", events=events(events_path))
    assert result.answer == "ok", result.error
    assert result.usage.sub_calls == 3 and len(sub.requests) == 3  # the batch of 5 failed whole, unspent
    observed = [m["content"] for m in root.requests[-1] if m["role"] == "user"]
    assert "5" in observed[1] and "Budget" in observed[2] and "['fine', 'fine', 'fine']" in observed[3]


# ---- bad clusters -------------------------------------------------------------------------------------------
def test_a_cluster_inside_this_process_is_refused_for_the_opt_in_before_any_model_call() -> None:
    with LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as inproc, Client(inproc):
        frame = dd.from_pandas(pd.DataFrame({"v": [1, 2, 3]}), npartitions=1)
        root = ScriptedLM([code("print(1)")], name="root")
        result = RLM(root, ScriptedLM(lambda m: "x", name="sub"), sandbox="kernel",
                     allow_model_code_on_dask_cluster=True).run("?", v=frame)
    assert result.status == "error" and root.requests == []
    assert result.error is not None and "Input 'v': its Dask scheduler at inproc://" in result.error


def test_a_scheduler_the_kernel_cannot_reach_is_one_sentence_naming_the_input() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the connection is tried: nothing listens there
    spec = {"how": "dask_cluster", "address": f"tcp://127.0.0.1:{port}", "dataset": "x", "connect_timeout": 1}
    with pytest.raises(InputError, match=rf"Input 'events': the sandbox kernel cannot reach the Dask scheduler at "
                                         rf"tcp://127.0.0.1:{port} \(.*\); let the kernel reach it"):
        dask_frames._reopen("events", spec)


# ---- sql() ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
async def test_sql_streams_a_dask_frame_partition_by_partition_for_every_query(
        kind: str, client: Client, events_path: Path) -> None:
    body = ("print(sql('SELECT kind, count(*) AS n FROM events GROUP BY 1 ORDER BY 1').to_dict('records'))\n"
            "print(sql('SELECT max(amount) AS m FROM events WHERE user = 7').m[0])")
    out, shipped = await run_bound(kind, {"events": events(events_path)}, body)
    truth = pd.read_parquet(events_path)
    counts = [{"kind": k, "n": int(n)} for k, n in truth.groupby("kind").size().sort_index().items()]
    assert out == f"{counts}\n{truth[truth.user == 7].amount.max()}\n"
    assert shipped == 0


# ---- security and clean-up ----------------------------------------------------------------------------------
@pytest.mark.integration
def test_a_tls_cluster_is_reached_with_the_users_security_settings_which_never_reach_the_record() -> None:
    from distributed.security import Security

    security = Security.temporary()
    with LocalCluster(n_workers=1, processes=False, protocol="tls://", security=security,
                      dashboard_address=":0") as tls, Client(tls, security=security) as c:
        assert c.scheduler.address.startswith("tls://")
        frame = dd.from_pandas(pd.DataFrame({"v": np.arange(100)}), npartitions=2)
        root = ScriptedLM([code("print(int(inputs['v'].v.sum().compute()))"), code("submit('ok')")], name="root")
        result = RLM(root, ScriptedLM(lambda m: "x", name="sub"), sandbox="kernel", evidence_check=False,
                     allow_model_code_on_dask_cluster=True).run("?", v=frame)
    assert result.answer == "ok", result.error
    assert "4950" in root.requests[1][-1]["content"]  # the kernel's TLS client computed it
    assert "PRIVATE KEY" not in json.dumps(result.trajectory.to_dict())


@pytest.mark.integration
async def test_a_published_collection_is_unpublished_when_the_user_lets_it_go(client: Client,
                                                                             events_path: Path) -> None:
    gc.collect()  # collections of earlier tests are let go (and unpublished) first
    before = set(client.list_datasets())
    frame = events(events_path)
    out = await run_opted_in("kernel", {"events": frame}, "print(inputs['events'].npartitions)")
    assert out == "4\n"
    published = set(client.list_datasets()) - before
    assert len(published) == 1 and next(iter(published)).startswith("rlmnb-")
    del frame
    gc.collect()
    assert set(client.list_datasets()) == before
