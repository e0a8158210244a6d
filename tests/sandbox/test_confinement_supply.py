"""Issue 20, the supply side of the kernel sandbox's confinement: a warm spare never carries an earlier
run's read rules into a later run, the broker authenticates before it reads a frame, value files are
opened without a check-then-open race, and lazy inputs over globs and Hive folders run confined (their
folders readable, nothing around them)."""

from __future__ import annotations

import asyncio
import os
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sandbox_support import REFUSED, EchoHost, code

from rlmnb import RLM
from rlmnb._ground.config import RLMConfig
from rlmnb._sandbox import transfer
from rlmnb._sandbox.bridge import HEADER, TOKEN_SIZE, connect, pack, recv_frame
from rlmnb._sandbox.confinement import policy as confinement
from rlmnb._sandbox.kernel.sandbox import KernelSandbox
from rlmnb._sandbox.kernel.warm import pool
from rlmnb._sandbox.transfer import decode_value, make_transfer_dir
from rlmnb.events import CodeExecuted
from rlmnb.inputs import bind_inputs
from rlmnb.testing import ScriptedLM

CONFINED = pytest.mark.skipif(confinement.support()[1] != "", reason="no Landlock ABI 4 + seccomp here")
PRIVATE = "PRIVATE-NOTES-7f3a"


@pytest.fixture
def fresh_pool() -> Iterator[None]:
    pool.shutdown(reopen=True)
    yield
    pool.shutdown(reopen=True)


@pytest.fixture
def private(tmp_path: Path) -> Path:
    where = tmp_path / "private" / "notes.txt"
    where.parent.mkdir()
    where.write_text(PRIVATE)
    return where


# ---- 1. a warm spare keeps no earlier run's rules ---------------------------------------------------------------
async def _one_run(inputs: dict[str, Any], snippet: str) -> tuple[Any, int]:
    """One sandbox over `inputs`: (the snippet's result, the kernel's process as the host knows it)."""
    fields, _ = bind_inputs(inputs, RLMConfig())
    sandbox = KernelSandbox()
    try:
        await sandbox.start(EchoHost(asyncio.get_running_loop()))
        await sandbox.bind(fields)
        result = await sandbox.execute(snippet, 30)
        pid = sandbox.kernel_pid  # inside its own PID namespace the kernel's own pid says nothing
        assert pid is not None
        return result, pid
    finally:
        await sandbox.close()


def _spare_pid() -> int:
    assert pool.wait_idle(60) and pool.has_spare
    spare = pool.spare()
    assert spare is not None and spare.pid is not None
    return int(spare.pid)


@pytest.mark.integration
@CONFINED
def test_a_spare_serves_only_a_run_granted_exactly_what_it_was(private: Path, fresh_pool: None) -> None:
    read = f"print(open({str(private)!r}).read())"
    a, _ = asyncio.run(_one_run({"notes": private}, read))
    assert a.stdout.strip() == PRIVATE  # run A may read its own file
    made_by_a, hits = _spare_pid(), pool.hits
    c, c_pid = asyncio.run(_one_run({"notes": private}, read))
    assert c.stdout.strip() == PRIVATE and c_pid == made_by_a and pool.hits == hits + 1  # same file: warm
    made_by_c, hits = _spare_pid(), pool.hits
    b, b_pid = asyncio.run(_one_run({"text": "no files here"}, read + "\nprint('after')"))
    assert pool.hits == hits + 1 and b_pid != made_by_c  # taken, but granted A's file: killed, B started cold
    assert b.error_type in REFUSED and PRIVATE not in b.stdout + (b.error or "")
    made_by_b = _spare_pid()
    d, d_pid = asyncio.run(_one_run({"text": "still none"}, "print('next')"))
    assert d.stdout.strip() == "next" and d_pid == made_by_b  # runs without files share warm spares
    e, _ = asyncio.run(_one_run({"text": "none"}, read))
    assert e.error_type in REFUSED


def test_the_fit_check_compares_grants_for_equality(private: Path) -> None:
    from rlmnb._sandbox.kernel.process import KernelProcess

    sandbox = KernelSandbox(confinement="off")
    fields, _ = bind_inputs({"notes": private}, RLMConfig())
    sandbox._fields = {f.name: f for f in fields}
    wide = KernelProcess({}, None, confine={"transfer_dir": "/nowhere", "broker_port": 1, **sandbox._grants()})
    sandbox._fields = {}
    narrow = KernelProcess({}, None, confine={"transfer_dir": "/elsewhere", "broker_port": 2, **sandbox._grants()})
    try:
        assert not sandbox._fits(wide) and sandbox._fits(narrow)  # the home's dir and port do not count
        assert wide.policy is not None and wide.policy.covers([str(private)], [])  # covering is not fitting
    finally:
        for k in (wide, narrow):
            k.kill()


# ---- 2. the broker authenticates before it reads -------------------------------------------------------------------
def _rss() -> int:
    return int(psutil.Process().memory_info().rss)


@pytest.mark.integration
async def test_unauthenticated_bytes_are_refused_after_the_token_and_never_buffered() -> None:
    sandbox = KernelSandbox()
    try:
        host = EchoHost(asyncio.get_running_loop())
        await sandbox.start(host)
        await sandbox.bind([])
        broker = sandbox._broker
        assert broker is not None
        settings = broker.settings()

        def closed_after_token() -> bytes:
            with connect(settings) as sock:
                sock.settimeout(10)
                sock.sendall(b"x" * TOKEN_SIZE)  # then nothing more: the broker must close by itself
                return sock.recv(1)

        assert await asyncio.to_thread(closed_after_token) == b""
        assert broker.refused == 1

        def ask(token: bytes) -> Any:
            with connect(settings) as sock:
                sock.settimeout(10)
                sock.sendall(token + pack({"run": broker.run, "turn": 1, "step": 1, "id": 1, "op": "llm_query",
                                           "prompt": "hi"}))
                try:
                    return recv_frame(sock)
                except Exception as exc:
                    return type(exc).__name__

        assert await asyncio.to_thread(ask, b"0" * TOKEN_SIZE) == "ProtocolError"  # a bad token: no answer
        assert broker.refused == 2 and host.prompts == []

        sent: list[int] = []

        def flood() -> None:  # a 200 MiB length prefix, then 64 MiB of junk
            junk = HEADER.pack(200 << 20) + b"\0" * (1 << 20)
            total = 0
            try:
                with connect(settings) as sock:
                    sock.settimeout(10)
                    for _ in range(64):
                        sock.sendall(junk)
                        total += len(junk)
            except OSError:
                pass
            sent.append(total)

        before = _rss()
        threads = [threading.Thread(target=flood) for _ in range(2)]
        for t in threads:
            t.start()
        legit = await sandbox.execute("print(llm_query('ping'))", 30)  # a run goes on meanwhile
        for t in threads:
            await asyncio.to_thread(t.join, 60)
        grown = _rss() - before
        assert legit.error is None and legit.stdout.strip() == "PING"
        assert broker.refused == 4 and all(n < (64 << 20) for n in sent)  # cut off long before the end
        assert grown < 16 << 20, f"the host grew by {grown / 2**20:.1f} MiB during the flood"
    finally:
        await sandbox.close()


# ---- 3. value files: no check-then-open ----------------------------------------------------------------------------
@pytest.fixture
def transfer_dir() -> Iterator[str]:
    where = make_transfer_dir()
    yield where
    import shutil

    shutil.rmtree(where, ignore_errors=True)


def _value(where: str, name: str) -> dict[str, Any]:
    return {"$rlmnb": "npy", "path": os.path.join(where, name)}


def test_a_value_file_that_is_a_link_or_not_plain_is_refused(transfer_dir: str, private: Path) -> None:
    np.save(private.parent / "secret.npy", np.array([42]))
    os.symlink(private.parent / "secret.npy", os.path.join(transfer_dir, "vlink.npy"))
    np.save(os.path.join(transfer_dir, "vorig.npy"), np.array([42]))  # a hard link stands for one to elsewhere
    os.link(os.path.join(transfer_dir, "vorig.npy"), os.path.join(transfer_dir, "vhard.npy"))
    os.mkfifo(os.path.join(transfer_dir, "vfifo.npy"))
    for name in ("vlink.npy", "vhard.npy", "vfifo.npy", "../private/secret.npy", ".."):
        with pytest.raises(ValueError, match="was refused"):
            decode_value(_value(transfer_dir, name), transfer_dir, allow_pickle=False)
    np.save(os.path.join(transfer_dir, "vok.npy"), np.array([1, 2]))
    assert decode_value(_value(transfer_dir, "vok.npy"), transfer_dir, allow_pickle=False).tolist() == [1, 2]
    assert not os.path.exists(os.path.join(transfer_dir, "vok.npy"))  # read once, then gone


def test_a_link_swapped_in_after_any_check_is_not_followed(transfer_dir: str, private: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    np.save(private.parent / "secret.npy", np.array([42]))
    target = os.path.join(transfer_dir, "vswap.npy")
    np.save(target, np.array([1]))
    real_open = os.open

    def swapping_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & os.O_DIRECTORY and os.path.lexists(target):  # the last moment before the file is opened
            os.unlink(target)
            os.symlink(private.parent / "secret.npy", target)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(transfer.os, "open", swapping_open)
    with pytest.raises(ValueError, match="was refused"):
        decode_value(_value(transfer_dir, "vswap.npy"), transfer_dir, allow_pickle=False)


@pytest.mark.integration
@CONFINED
def test_a_planted_link_in_the_transfer_folder_gives_an_observation(private: Path) -> None:
    np.save(private.parent / "secret.npy", np.array([7, 3, 1, 9]))
    attack = ("import os, sys\nbridge = sys.modules['rlmnb._sandbox.kernel.side'].runtime.bridge\n"
              "d = bridge.settings['transfer_dir']\n"
              f"os.symlink({str(private.parent / 'secret.npy')!r}, d + '/vplant.npy')\n"
              "print(bridge.call('tool', name='echo', args=[{'$rlmnb': 'npy', 'path': d + '/vplant.npy'}],"
              " kwargs={}))")
    lm = ScriptedLM([code(attack), code("print('carried on')"), code("submit(1)")])
    result = RLM(lm, max_iterations=3, tools={"echo": lambda x: x}).run("q")
    executed = [e for e in result.trajectory.events if isinstance(e, CodeExecuted)]
    assert executed[0].error_type == "ValueError" and "was refused" in (executed[0].error or "")
    assert "7, 3, 1, 9" not in executed[0].stdout and "[7 3 1 9]" not in executed[0].stdout
    assert executed[1].stdout.strip() == "carried on"


# ---- 4. lazy inputs over globs and Hive folders, confined ----------------------------------------------------------
@pytest.fixture
def hive(tmp_path: Path) -> Path:
    for year in (2024, 2025):
        folder = tmp_path / "data" / f"year={year}"
        folder.mkdir(parents=True)
        pq.write_table(pa.table({"x": [1, 2, 3]}), folder / "part-0.parquet")
        (tmp_path / "csv" / f"year={year}").mkdir(parents=True)
        (tmp_path / "csv" / f"year={year}" / "part-0.csv").write_text("x\n1\n2\n3\n")
    (tmp_path / "sibling").mkdir()
    (tmp_path / "sibling" / "notes.txt").write_text(PRIVATE)
    return tmp_path


def _lazy(kind: str, root: Path) -> tuple[Any, str]:
    data = root / "data"
    if kind == "polars glob":
        import polars as pl

        return pl.scan_parquet(f"{data}/**/*.parquet", hive_partitioning=True), "x.collect().height"
    if kind == "polars hive folder":
        import polars as pl

        return pl.scan_parquet(f"{data}/", hive_partitioning=True), "x.collect().height"
    if kind == "polars csv glob":
        import polars as pl

        return pl.scan_csv(f"{root}/csv/year=202?/*.csv"), "x.collect().height"
    if kind == "polars one file":
        import polars as pl

        return pl.scan_parquet(f"{data}/year=2024/part-0.parquet"), "x.collect().height * 2"
    if kind == "duckdb glob":
        import duckdb

        return duckdb.read_parquet(f"{data}/**/*.parquet", hive_partitioning=True), "len(x.df())"
    if kind == "arrow hive dataset":
        import pyarrow.dataset as ds

        return ds.dataset(data, partitioning="hive"), "x.to_table().num_rows"
    import dask.dataframe as dd

    return dd.read_parquet(f"{data}/**/*.parquet"), "len(x.compute())"


@pytest.mark.integration
@CONFINED
@pytest.mark.parametrize("kind", ["polars glob", "polars hive folder", "polars csv glob", "polars one file",
                                  "duckdb glob", "arrow hive dataset", "dask glob"])
def test_lazy_inputs_over_globs_and_hive_folders_run_confined(kind: str, hive: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value, expr = _lazy(kind, hive)
    snippets = [f"x = inputs['x']\nprint({expr})", f"print(open({str(hive / 'sibling' / 'notes.txt')!r}).read())",
                f"import os\nprint(os.listdir({str(hive)!r}))", "submit(1)"]
    result = RLM(ScriptedLM([code(s) for s in snippets]), max_iterations=4).run("q", x=value)
    executed = [e for e in result.trajectory.events if isinstance(e, CodeExecuted)]
    assert executed[0].error is None, executed[0].error
    assert executed[0].stdout.strip() == "6"
    assert executed[1].error_type in REFUSED and PRIVATE not in executed[1].stdout  # the sibling
    assert executed[2].error_type in REFUSED  # and the folder around the data


@pytest.mark.integration
@CONFINED
@pytest.mark.parametrize("namespaces", [True, False])
def test_a_link_planted_at_the_next_input_name_is_never_written_through(tmp_path: Path, namespaces: bool) -> None:
    """The fallback's transfer folder is the kernel's to write: links at every name the host may write next
    (`in<N>.<ext>`) are removed, not followed, when a later cell binds a new input. In its own namespaces the
    folder is read-only to the kernel, so nothing can be planted at all."""
    import pandas as pd

    victim = tmp_path / "notes.txt"
    victim.write_text("the user's notes")
    first, _ = bind_inputs({"text": "hello"}, RLMConfig())
    later, _ = bind_inputs({"df": pd.DataFrame({"x": [1, 2, 3]}), "more": "text two"}, RLMConfig())
    plant = ("import os, rlmnb._sandbox.kernel.side as side\nfolder = side.runtime.bridge.settings['inbox']\n"
             "n = 0\nfor i in range(1, 10):\n    for ext in ('.txt', '.arrow', '.npy', '.pkl', '.bin'):\n"
             "        try:\n"
             f"            os.symlink({str(victim)!r}, os.path.join(folder, f'in{{i}}{{ext}}'))\n"
             "            n += 1\n        except OSError:\n            pass\nprint(n)")

    async def scenario() -> tuple[Any, Any]:
        sandbox = KernelSandbox(warm=False, namespaces=namespaces)
        try:
            await sandbox.start(EchoHost(asyncio.get_running_loop()))
            await sandbox.bind(first)
            planted = await sandbox.execute(plant, 30)
            await sandbox.bind(later)  # a --continue cell with new inputs
            used = await sandbox.execute("print(int(inputs['df']['x'].sum()), inputs['more'])", 30)
            return planted, used
        finally:
            await sandbox.close()

    planted, used = asyncio.run(scenario())
    assert used.error is None and used.stdout.strip() == "6 text two"
    assert victim.read_text() == "the user's notes"
    assert (int(planted.stdout) > 0) == (not namespaces)  # read-only to a namespaced kernel
