"""What hostile or broken model code does to the kernel sandbox: each fault ends in the documented
observation, the run completes, this (host) process is intact, and no process or file is left.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from sandbox_support import EchoHost, code, leftovers, observations

from rlmnb import RLM
from rlmnb._sandbox import transfer
from rlmnb._sandbox.bridge import TOKEN_SIZE, connect, pack, recv_frame
from rlmnb._sandbox.kernel.environment import looks_secret, sandbox_env
from rlmnb._sandbox.kernel.sandbox import KernelSandbox
from rlmnb._sandbox.kernel.warm import pool
from rlmnb.events import CodeExecuted
from rlmnb.testing import ScriptedLM

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("stop_the_spare")]


@pytest.fixture(autouse=True)
def no_leftovers() -> Iterator[None]:
    yield
    assert leftovers() == {}




def run(replies: list[str], *, inputs: dict[str, Any] | None = None, **kw: Any) -> tuple[Any, ScriptedLM]:
    root = ScriptedLM(replies, name="root")
    kw.setdefault("evidence_check", False)  # the scripts submit words they never printed ('ok', 'done')
    rlm = RLM(root, ScriptedLM(lambda m: "sub-reply", name="sub"), sandbox="kernel", **kw)
    return rlm.run("What is it?", **(inputs if inputs is not None else {"text": "alpha beta gamma"})), root


def executed(result: Any, step: int) -> CodeExecuted:
    return result.trajectory.of(CodeExecuted)[step]  # type: ignore[no-any-return]


# ---- runaway code ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("body", ["while True:\n    pass", "import time\ntime.sleep(10**6)"])
def test_a_snippet_over_its_timeout_is_interrupted_and_the_kernel_kept(body: str) -> None:
    result, root = run([code("x = 41"), code(body), code("submit(x + 1)")], timeout=0.5)
    assert result.status == "submitted" and result.answer == 42
    step = executed(result, 1)
    assert step.timed_out and not step.restarted
    assert step.duration_s < 0.5 + 10  # interrupted, not waited out (how soon is measured in bench/sandbox.py)
    assert "did not finish within 0.5 seconds" in observations(root)[1]


def test_code_that_ignores_the_interrupt_gets_a_fresh_kernel_with_inputs_bound_again() -> None:
    stubborn = ("import time\nwhile True:\n    try:\n        time.sleep(0.01)\n    except BaseException:\n"
                "        pass")
    replies = [code("x = 1"), code(stubborn), code("print(inputs['text'])\nx"), code("submit('ok')")]
    result, root = run(replies, timeout=0.5)
    assert result.answer == "ok"
    step = executed(result, 1)
    assert step.timed_out and step.restarted
    obs = observations(root)
    assert "did not finish" in obs[1] and "kernel was restarted" in obs[1] and "variables are lost" in obs[1]
    assert "alpha beta gamma" in obs[2] and "NameError" in obs[2]


def test_what_a_snippet_printed_before_its_kernel_died_or_stuck_still_reaches_the_model() -> None:
    dies = "import os, sys\nprint('chunk 1 of 3 done')\nprint('careful', file=sys.stderr)\nos._exit(3)"
    sticks = ("import time\nprint('started the slow part')\nprint('y' * 50_000)\nwhile True:\n    try:\n"
              "        time.sleep(0.01)\n    except BaseException:\n        pass")
    replies = [code(dies), code(sticks), code("print('fine')"), code("submit('ok')")]
    result, root = run(replies, timeout=1.0)
    assert result.answer == "ok"
    died, stuck, fine = (executed(result, i) for i in range(3))
    assert died.restarted and died.stdout == "chunk 1 of 3 done\n" and died.stderr == "careful\n"
    assert stuck.restarted and stuck.stdout == ("started the slow part\n" + "y" * 50_000)[:10_000]  # the head
    assert fine.stdout == "fine\n" and not fine.restarted
    obs = observations(root)
    assert "chunk 1 of 3 done" in obs[0] and "careful" in obs[0] and "exit code 3" in obs[0]
    assert "started the slow part" in obs[1] and "kernel was restarted" in obs[1]


# ---- memory --------------------------------------------------------------------------------------------------
def test_a_memory_bomb_under_a_memory_limit_is_a_memory_error() -> None:
    host_rss = psutil.Process().memory_info().rss
    bomb = "chunks = []\nwhile True:\n    chunks.append(bytearray(50 * 10**6))"
    replies = [code("big = bytearray(8 * 10**9)"), code(bomb), code("chunks = None\nprint('still here')"),
               code("submit('done')")]
    result, root = run(replies, memory_limit="600MB")
    assert result.status == "submitted" and result.answer == "done"
    obs = observations(root)
    assert "MemoryError" in obs[0]
    assert "MemoryError" in obs[1] or "kernel process died" in obs[1]  # a thread of the kernel may fail first
    if "MemoryError" in obs[1]:
        assert "still here" in obs[2]
    assert psutil.Process().memory_info().rss - host_rss < 200 * 2**20


def test_a_memory_limit_below_what_the_kernel_needs_is_a_clear_error() -> None:
    result, _ = run([code("print(1)")], memory_limit="50MB")
    assert result.status == "error"
    assert "memory_limit" in result.reason and "Raise memory_limit" in result.reason


# ---- a dying kernel ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("body, cause", [("import os\nos._exit(1)", "exit code 1"),
                                         ("import os\nos.kill(os.getpid(), 9)", "killed by signal SIGKILL"),
                                         ("import ctypes\nctypes.string_at(0)", "killed by signal SIGSEGV")])
def test_a_kernel_that_dies_is_noticed_restarted_and_the_run_goes_on(body: str, cause: str) -> None:
    replies = [code("x = 1\nprint('before')"), code(body), code("print(inputs['text'])\nprint(x)"),
               code("submit('survived')")]
    result, root = run(replies)
    assert result.status == "submitted" and result.answer == "survived"
    step = executed(result, 1)
    assert step.restarted and step.error_type == "KernelDied"
    assert step.duration_s < 10  # noticed, not waited out to the 60 s timeout (latency: bench/sandbox.py)
    obs = observations(root)
    assert cause in obs[1] and "died" in obs[1] and "variables are lost" in obs[1]
    assert "alpha beta gamma" in obs[2] and "NameError" in obs[2]


async def test_a_kernel_killed_between_steps_is_replaced_before_the_next_one() -> None:
    sandbox = KernelSandbox()
    try:
        await sandbox.start(EchoHost(asyncio.get_running_loop()))
        await sandbox.bind([])
        await sandbox.execute("x = 1", 5)
        old = sandbox.kernel_pid
        assert old is not None
        os.kill(old, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while sandbox._kernel is not None and sandbox._kernel.alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        result = await sandbox.execute("print(llm_query('still works'))", 5)
        assert result.stdout == "STILL WORKS\n"
        assert result.notice is not None and "had died since your last step" in result.notice
        assert sandbox.kernel_pid != old and sandbox.restarts == 1
    finally:
        await sandbox.close()


async def test_raw_writes_to_fd_2_cannot_fill_the_disk() -> None:
    from rlmnb._sandbox.kernel.sandbox import LOG_CAP, LOG_TAIL

    sandbox = KernelSandbox()
    try:
        await sandbox.start(EchoHost(asyncio.get_running_loop()))
        await sandbox.bind([])
        # 40 MB straight to file descriptor 2, past Python's sys.stderr, over about two seconds
        flood = ("import os, time\nfor i in range(40):\n    os.write(2, b'x' * 999_999 + b'\\n')\n"
                 "    time.sleep(0.05)\nos.write(2, b'the last line\\n')")
        result = await sandbox.execute(flood, 30)
        assert result.ok, result
        assert sandbox._kernel is not None
        log = Path(sandbox._kernel.runtime_dir, "kernel.log")
        text = log.read_bytes()
        assert len(text) <= LOG_CAP and text.endswith(b"the last line\n")
        assert b"[... earlier output cut by rlmnb ...]" in text  # cut while the snippet ran, tail kept
        assert LOG_TAIL < LOG_CAP < 40 * 10**6
        assert (await sandbox.execute("print('alive')", 5)).stdout == "alive\n"
    finally:
        await sandbox.close()


def test_code_that_takes_the_kernel_side_apart_gets_a_fresh_kernel() -> None:
    body = "import IPython\nIPython.get_ipython().user_ns['__rlmnb__'] = None"
    result, root = run([code("x = 1"), code(body), code("print(inputs['text'])\nx"), code("submit('ok')")])
    assert result.answer == "ok"
    step = executed(result, 1)
    assert step.restarted and step.error_type == "SandboxBroken"
    obs = observations(root)
    assert "restarted" in obs[1] and "alpha beta gamma" in obs[2] and "NameError" in obs[2]


# ---- processes the model starts ------------------------------------------------------------------------------------
def test_forks_that_outlive_the_snippet_are_killed_with_the_sandbox() -> None:
    """A fork, a setsid daemon, and one that also execs with an empty environment (no marker to find it by):
    none is left once the run ends. Where the sandbox has its own PID namespace, every host process in that
    namespace is gone; elsewhere the pids the kernel saw are."""
    body = textwrap.dedent("""\
        import os, time
        child = os.fork()
        if child == 0:
            time.sleep(1000)
            os._exit(0)
        r, w = os.pipe()
        if os.fork() == 0:
            os.setsid()  # a daemon: its own session, and its parent exits at once
            if os.fork() == 0:
                os.write(w, str(os.getpid()).encode())
                time.sleep(1000)
            os._exit(0)
        daemon = int(os.read(r, 32))
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execve('/bin/sleep', ['sleep', '1000'], {})
            os._exit(0)
        ns = os.readlink('/proc/self/ns/pid')
        print('started', child > 0, daemon > 0)
        """)
    result, root = run([code(body), code("submit([child, daemon, ns])")])
    ended = time.time()
    assert "started True True" in observations(root)[0]
    child, daemon, ns = result.answer
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (_in_namespace(ns, ended) or any(_running(p) for p in (child, daemon))):
        time.sleep(0.05)
    if ns != os.readlink("/proc/self/ns/pid"):  # its own PID namespace: pids inside are not host pids
        assert _in_namespace(ns, ended) == []
    else:
        assert not _running(child) and not _running(daemon)


def _in_namespace(ns: str, before: float) -> list[int]:
    """Host processes in the PID namespace `ns` (as /proc/<pid>/ns/pid reads) started before `before`. Linux
    gives a dead namespace's number to new ones at once, and other tests make sandboxes meanwhile: a process
    started later is another sandbox's."""
    if ns == os.readlink("/proc/self/ns/pid"):
        return []
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if (os.readlink(f"/proc/{name}/ns/pid") == ns and _running(int(name))
                        and psutil.Process(int(name)).create_time() < before):
                    found.append(int(name))
            except (OSError, psutil.Error):
                continue
    return found


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


# ---- output ----------------------------------------------------------------------------------------------------
def test_printing_100_mb_is_bounded_and_fast(capfd: pytest.CaptureFixture[str]) -> None:
    host_rss = psutil.Process().memory_info().rss
    replies = [code("print('x' * 50_000_000)\nfor _ in range(50):\n    print('x' * 10**6)"),
               code("for i in range(200_000):\n    print(i, 'y' * 40)"), code("submit('done')")]
    result, root = run(replies, max_output_chars=2000, timeout=60)
    assert result.answer == "done"
    for step in (0, 1):
        stdout = executed(result, step).stdout
        assert len(stdout) < 5000 and "characters omitted" in stdout
    assert "199999 yyyy" in executed(result, 1).stdout
    assert len(observations(root)[0]) < 5000
    assert psutil.Process().memory_info().rss - host_rss < 150 * 2**20
    captured = capfd.readouterr()
    assert "xxxxxxxxxx" not in captured.out + captured.err


# ---- isolation ---------------------------------------------------------------------------------------------------
def test_secrets_never_reach_the_kernel_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-see-me")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok")
    monkeypatch.setenv("DB_PASSWORD", "hunter2")
    monkeypatch.setenv("DATABASE_URL", "postgres://user:hunter2@db/x")
    monkeypatch.setenv("PLAIN_LOOKING", "but secret")
    monkeypatch.setenv("REDIS_URL", "redis://:hunter2@cache:6379/0")
    monkeypatch.setenv("SLACK_WEBHOOK_URL", "https://hooks.example/T0/B0/secret")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    names = ["OPENAI_API_KEY", "MY_SERVICE_TOKEN", "DB_PASSWORD", "DATABASE_URL", "PLAIN_LOOKING", "REDIS_URL",
             "SLACK_WEBHOOK_URL", "OMP_NUM_THREADS"]
    body = f"import os\nseen = {{k: os.environ.get(k) for k in {names!r}}}\nprint(sorted(os.environ)[:3])"
    result, _ = run([code(body), code("submit([seen, 'sk-never-see-me' in str(dict(os.environ))])")],
                    secret_env=("PLAIN_LOOKING",))
    seen, leaked = result.answer
    assert seen == {name: None for name in names[:-1]} | {"OMP_NUM_THREADS": "1"}  # an allow-list
    assert leaked is False


def test_the_kernel_works_in_a_fresh_directory_not_the_users(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    body = "import os\nopen('out.txt', 'w').write('model was here')\nwhere = os.getcwd()\nprint(os.listdir('.'))"
    result, root = run([code(body), code("submit(where)")])
    assert "['out.txt']" in observations(root)[0]
    assert not (tmp_path / "out.txt").exists() and list(tmp_path.iterdir()) == []
    assert result.answer != str(tmp_path) and not os.path.exists(result.answer)


def test_secret_looking_names_and_values_are_recognised_for_the_journal() -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "HF_TOKEN",
                 "GITHUB_PAT", "DB_PASSWORD", "PGPASSWORD", "SENTRY_DSN", "MY_PWD", "SLACK_WEBHOOK_URL",
                 "GOOGLE_APPLICATION_CREDENTIALS", "AZURE_CLIENT_SECRET", "PRIVATE_KEY_PATH"):
        assert looks_secret(name), name
    for name in ("PATH", "HOME", "LANG", "PWD", "VIRTUAL_ENV", "PYTHONPATH", "TERM", "PATTERN", "USER"):
        assert not looks_secret(name), name
    assert looks_secret("DATABASE_URL", "postgres://u:p@host/db") and not looks_secret("SITE_URL", "https://a.b/c")
    assert looks_secret("REDIS_URL", "redis://:password@host:6379/0")  # an empty user name


def test_the_sandbox_environment_is_an_allow_list() -> None:
    host = {"CUSTOM": "1", "OPENAI_API_KEY": "k", "PATH": "/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            "REDIS_URL": "redis://:password@host", "SLACK_WEBHOOK_URL": "https://hooks.example/T0/B0/x",
            "HOME": "/root", "PYTHONPATH": "/home/me/project", "JPY_SESSION_NAME": "n.ipynb",
            "OMP_NUM_THREADS": "2", "DATABASE": "prod"}
    env = sandbox_env(base=host, extra={"HOME": "/scratch/home"})
    assert {k: env[k] for k in ("PATH", "LANG", "LC_ALL", "OMP_NUM_THREADS")} == {
        "PATH": "/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "OMP_NUM_THREADS": "2"}
    for name in ("CUSTOM", "OPENAI_API_KEY", "REDIS_URL", "SLACK_WEBHOOK_URL", "PYTHONPATH", "JPY_SESSION_NAME",
                 "DATABASE"):
        assert name not in env, name
    assert env["HOME"] == "/scratch/home"
    assert "LANG" not in sandbox_env(["LANG"], base=host)


# ---- the broker ---------------------------------------------------------------------------------------------------
async def test_the_broker_answers_only_requests_with_the_runs_secret() -> None:
    sandbox = KernelSandbox()
    try:
        host = EchoHost(asyncio.get_running_loop())
        await sandbox.start(host)
        await sandbox.bind([])
        broker = sandbox._broker
        assert broker is not None

        def ask(secret: str) -> Any:
            with connect(broker.settings()) as sock:
                sock.settimeout(5)
                sock.sendall(secret.encode("ascii").ljust(TOKEN_SIZE, b"-")[:TOKEN_SIZE]
                             + pack({"run": broker.run, "turn": 1, "step": 1, "id": 1, "op": "llm_query",
                                     "prompt": "hi"}))
                try:
                    return recv_frame(sock)
                except Exception as exc:
                    return type(exc).__name__

        assert await asyncio.to_thread(ask, "wrong") == "ProtocolError"
        good = await asyncio.to_thread(ask, broker.secret)
        assert good["ok"] and good["value"] == "HI" and host.prompts == ["hi"]
    finally:
        await sandbox.close()


# ---- leftovers after crashes ---------------------------------------------------------------------------------------
_HOST = textwrap.dedent("""\
    import json, sys
    from rlmnb import RLM
    from rlmnb.testing import ScriptedLM
    root = ScriptedLM(["```python\\nprint(2)\\n```", "```python\\nsubmit(2)\\n```"])
    result = RLM(root, sandbox="kernel").run("q", text="abc", keep_session=True)
    sandbox = result.session.sandbox
    import os
    print(json.dumps({"pid": sandbox.kernel_pid, "dir": sandbox.transfer_dir, "host": os.getpid()}), flush=True)
    if sys.argv[1] == "crash":
        import os, signal
        os.kill(os.getpid(), signal.SIGKILL)
    """)


@pytest.mark.parametrize("how", ["exit", "crash"])
def test_no_kernel_or_file_outlives_its_host_process(how: str, tmp_path: Path) -> None:
    script = tmp_path / "host.py"
    script.write_text(_HOST)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "RLMNB_WARM_KERNEL": "0"}
    proc = subprocess.run([sys.executable, str(script), how], capture_output=True, text=True, timeout=120, env=env)
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    pids = [info["pid"]]
    deadline = time.monotonic() + 10  # after a crash the kernel's parent poller notices within seconds
    while time.monotonic() < deadline and any(_running(p) for p in pids):
        time.sleep(0.1)
    assert not any(_running(p) for p in pids)
    if how == "crash":  # nobody was left to remove the files: the next host process to start a sandbox does
        transfer._swept = False
        transfer.sweep_stale()
    assert not os.path.exists(info["dir"])
    import tempfile

    stale = [n for n in os.listdir(tempfile.gettempdir()) if f"-{info['host']}-" in n and n.startswith("rlmnb-")]
    assert stale == []


def test_value_files_from_the_kernel_must_stay_in_the_transfer_directory(tmp_path: Path) -> None:
    import numpy as np
    import pandas as pd

    directory = transfer.make_transfer_dir()
    try:
        value = {"df": pd.DataFrame({"a": [1, 2]}), "arr": np.arange(3), "t": (1, "x"), "b": b"\x00",
                 "f": float("inf"), "nested": [{"k": None}]}
        back = transfer.decode_value(transfer.encode_value(value, directory, allow_pickle=False), directory,
                                     allow_pickle=False)
        pd.testing.assert_frame_equal(back["df"], value["df"])
        assert back["arr"].tolist() == [0, 1, 2] and back["t"] == (1, "x") and back["b"] == b"\x00"
        assert back["f"] == float("inf") and back["nested"] == [{"k": None}]
        assert os.listdir(directory) == []  # read files are deleted
        outside = tmp_path / "victim.npy"
        np.save(outside, np.arange(2))
        with pytest.raises(ValueError, match="outside"):
            transfer.decode_value({"$rlmnb": "npy", "path": str(outside)}, directory, allow_pickle=False)
        assert outside.exists()
        with pytest.raises(ValueError):
            transfer.decode_value({"$rlmnb": "pickle", "v": ""}, directory, allow_pickle=False)
    finally:
        import shutil

        shutil.rmtree(directory)


async def test_a_spare_started_with_a_variable_now_secret_is_never_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LC_MONETARY", "was-plain")
    monkeypatch.delenv("LC_PAPER", raising=False)
    first = KernelSandbox()
    await first.start(EchoHost(asyncio.get_running_loop()))
    await first.bind([])
    await first.close()
    assert pool.wait_idle(60) and pool.has_spare  # made while LC_MONETARY was an ordinary variable (allowed: LC_*)
    monkeypatch.setenv("LC_PAPER", "new")
    second = KernelSandbox(secret_env=("LC_MONETARY",))
    try:
        await second.start(EchoHost(asyncio.get_running_loop()))
        await second.bind([])
        body = ("import os\nprint(os.environ.get('LC_MONETARY'), os.environ.get('LC_PAPER'),\n"
                "      b'was-plain' in open('/proc/self/environ', 'rb').read())")
        result = await second.execute(body, 10)
        assert result.stdout == "None new False\n"
    finally:
        await second.close()
    spare = KernelSandbox()  # an ordinary run takes the spare and sees variables added since it started
    try:
        await spare.start(EchoHost(asyncio.get_running_loop()))
        await spare.bind([])
        result = await spare.execute("import os\nprint(os.environ.get('LC_PAPER'))", 10)
        assert result.stdout == "new\n"
    finally:
        await spare.close()


def test_runs_leave_no_threads_behind() -> None:
    def threads() -> tuple[int, int]:
        pool.wait_idle(60)
        time.sleep(0.2)
        return threading.active_count(), psutil.Process().num_threads()

    run([code("print(1)"), code("submit(1)")])
    before = threads()
    for _ in range(3):
        result, _ = run([code("print(llm_query('x'))"), code("submit(1)")])
        assert result.status == "submitted"
    assert threads() == before
