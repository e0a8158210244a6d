"""The first layer: the namespaces bubblewrap builds (namespaces.py), checked on the real thing.

What the sandbox sees is what the Layout names, read-only unless named writable; its scratch, /tmp and
/dev/shm are capped; its root and /dev are read-only; it has no network and no capability; the probe says
why when the namespaces cannot be built. A test that needs bubblewrap skips here only where the system has
none, and fails in CI (ci_confinement.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sandbox_support import code

from rlmnb import RLM
from rlmnb._sandbox.confinement import namespaces
from rlmnb._sandbox.confinement.policy import python_paths
from rlmnb.events import CodeExecuted
from rlmnb.testing import ScriptedLM

NEEDS_BWRAP = pytest.mark.skipif(namespaces.probe() != "", reason=f"no namespaces here: {namespaces.probe()}")


def test_a_bind_inside_another_is_left_to_its_parent() -> None:
    assert namespaces._nested(["/usr/lib", "/usr", "/nowhere-at-all", "/usr/lib/x", "/etc"]) == ["/etc", "/usr"]


def test_the_probe_says_why_without_bubblewrap(monkeypatch: pytest.MonkeyPatch) -> None:
    namespaces.probe.cache_clear()
    monkeypatch.setattr(namespaces.shutil, "which", lambda name: None)
    try:
        assert "bubblewrap is not installed" in namespaces.probe()
    finally:
        namespaces.probe.cache_clear()


def _inside(body: str, layout: namespaces.Layout) -> dict[str, object]:
    """Run `body` (which sets `out`, a dict) in the namespaces and return `out`."""
    script = "import json, os, socket, errno\nout = {}\n" + textwrap.dedent(body) + "\nprint(json.dumps(out))"
    done = subprocess.run(namespaces.command([sys.executable, "-c", script], layout), capture_output=True, text=True,
                          timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _errno(attempt: str) -> str:
    return (f"try:\n    {attempt}\n    result = 'allowed'\nexcept OSError as exc:\n"
            "    result = errno.errorcode.get(exc.errno, str(exc.errno))\n")


@NEEDS_BWRAP
def test_it_sees_only_what_the_layout_names_and_writes_only_its_capped_scratch(tmp_path: Path) -> None:
    inputs, writable, hidden = tmp_path / "inputs", tmp_path / "out", tmp_path / "secret"
    for folder in (inputs, writable, hidden):
        folder.mkdir()
    (inputs / "a.txt").write_text("input body")
    (inputs / "link.txt").symlink_to(inputs / "a.txt")
    (hidden / "key").write_text("SECRET")
    layout = namespaces.Layout(read_only=(*python_paths(), str(inputs), str(inputs / "a.txt")),
                               read_write=(str(writable),), scratch_bytes=1 << 20)
    checks = {
        "input": f"open({str(inputs / 'link.txt')!r}).read()",
        "write input": f"open({str(inputs / 'b.txt')!r}, 'w')",
        "hidden": f"open({str(hidden / 'key')!r}).read()",
        "parent": f"out['parent'] = sorted(os.listdir({str(tmp_path)!r}))",
        "write rw": f"open({str(writable / 'c.txt')!r}, 'w').write('ok')",
        "fill scratch": "open(os.path.join(os.environ['TMPDIR'], 'big'), 'wb').write(b'x' * (2 << 20))",
        "fill /dev/shm": f"open('/dev/shm/big', 'wb').write(b'x' * ({namespaces.SHM_BYTES} + (1 << 20)))",
        "root": "os.mkdir('/planted')",
        "dev": "open('/dev/planted', 'w')",
        "network": "socket.create_connection(('127.0.0.1', 22), timeout=2)",
        "udp out": "socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('8.8.8.8', 53))",
    }
    body = "".join(_errno(attempt) + f"out[{name!r}] = out.get({name!r}, result)\n" for name, attempt in checks.items())
    body += ("out['caps'] = [l.split()[1] for l in open('/proc/self/status') if l.startswith('Cap')]\n"
             "out['pids'] = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"
             "out['cwd'] = os.getcwd()\n")
    out = _inside(body, layout)
    assert out["input"] == "allowed" and out["write rw"] == "allowed"
    assert (writable / "c.txt").read_text() == "ok"
    assert out["write input"] == "EROFS" and out["root"] == "EROFS" and out["dev"] == "EROFS"
    assert out["hidden"] == "ENOENT" and out["parent"] == ["inputs", "out"]  # no "secret": it is not there
    assert out["fill scratch"] == "ENOSPC" and out["fill /dev/shm"] == "ENOSPC"
    assert out["network"] == "ECONNREFUSED" and out["udp out"] == "ENETUNREACH"  # its own loopback only
    assert set(out["caps"]) == {"0000000000000000"}  # type: ignore[arg-type]
    assert out["pids"] == [1, 2] and out["cwd"] == namespaces.WORK  # bubblewrap's reaper and itself


@NEEDS_BWRAP
def test_a_folder_input_and_a_glob_over_it_with_a_link_inside_run_together(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "a.txt").write_text("alpha")
    (inbox / "latest.txt").symlink_to(inbox / "a.txt")
    root = ScriptedLM([code("print(sorted(inputs['folder']), inputs['texts']['latest.txt'])"), code("submit(1)")])
    result = RLM(root, ScriptedLM(["x"]), sandbox="kernel", max_iterations=2).run(
        "q", folder=inbox, texts=Path(f"{inbox}/*.txt"))
    executed = [e for e in result.trajectory.events if isinstance(e, CodeExecuted)]
    assert executed[0].error is None and "alpha" in executed[0].stdout
    assert result.confinement is not None and result.confinement.namespaced


@NEEDS_BWRAP
def test_nothing_of_the_sandbox_is_left_when_its_host_is_killed(tmp_path: Path) -> None:
    """--die-with-parent and the PID namespace: a host killed with SIGKILL (no clean-up code runs) takes the
    kernel and a daemon it started along."""
    marker = tmp_path / "ns.txt"
    host = textwrap.dedent(f"""
        import os, time
        from rlmnb import RLM
        from rlmnb.testing import ScriptedLM
        body = ("import os, time\\nif os.fork() == 0:\\n    os.setsid()\\n    if os.fork() == 0:\\n"
                "        os.execve('/bin/sleep', ['sleep', '1000'], {{}})\\n    os._exit(0)\\n"
                "open('/proc/self/ns/pid').close()\\nprint(os.readlink('/proc/self/ns/pid'))\\n")
        root = ScriptedLM(["```python\\n" + body + "```", "```python\\nimport time\\ntime.sleep(1000)\\n```"])
        def write(event):
            if getattr(event, 'kind', '') == 'code_executed' and event.stdout.strip():
                open({str(marker)!r}, 'w').write(event.stdout.strip())
        RLM(root, ScriptedLM(['x']), sandbox='kernel', max_iterations=2, timeout=600,
            on_event=write).run('q')
    """)
    proc = subprocess.Popen([sys.executable, "-c", host], env={**os.environ, "RLMNB_WARM_KERNEL": "0"})
    try:
        deadline = 120
        import time

        start = time.monotonic()
        while not marker.exists() and time.monotonic() - start < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert marker.exists(), "the kernel did not report its namespace"
        ns = marker.read_text()
        proc.kill()
        proc.wait(30)
        killed = time.time()
        start = time.monotonic()
        while _in(ns, killed) and time.monotonic() - start < 10:
            time.sleep(0.1)
        assert _in(ns, killed) == []
    finally:
        if proc.poll() is None:
            proc.kill()


def _in(ns: str, before: float) -> list[int]:
    """Live processes in the PID namespace `ns` started before `before` (Linux gives a dead namespace's number to
    new ones at once, and other tests make sandboxes meanwhile)."""
    import psutil

    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                proc = psutil.Process(int(name))
                if (os.readlink(f"/proc/{name}/ns/pid") == ns and proc.status() != psutil.STATUS_ZOMBIE
                        and proc.create_time() < before):
                    found.append(int(name))
            except (OSError, psutil.Error):
                continue
    return found


@NEEDS_BWRAP
def test_a_fork_bomb_stops_at_the_sandbox_task_cap() -> None:
    """The sandbox's task cap (its pids cgroup, or RLIMIT_NPROC in its own user namespace): a fork bomb stops at
    it, the run carries on, and the processes end with the kernel."""
    from rlmnb._sandbox.confinement import tasks

    if not tasks.mechanism(namespaced=True):
        pytest.skip("nothing caps a sandbox's tasks here: no writable pids cgroup and the user is root")
    cap = tasks.cap()
    body = ("import subprocess\nkids = []\ntry:\n    for _ in range(100_000):\n"
            "        kids.append(subprocess.Popen(['/bin/sleep', '60']))\nexcept OSError as exc:\n"
            "    stopped = type(exc).__name__\nprint(len(kids), stopped)\nfor k in kids:\n    k.kill()\n"
            "for k in kids:\n    k.wait()")
    root = ScriptedLM([code(body), code("print(inputs['text'])"), code("submit('carried on')")])
    result = RLM(root, ScriptedLM(["x"]), sandbox="kernel", max_iterations=3, timeout=120).run("q", text="hello")
    executed = [e for e in result.trajectory.events if isinstance(e, CodeExecuted)]
    started, stopped = executed[0].stdout.split()
    assert 0 < int(started) < cap and stopped == "BlockingIOError"
    assert executed[1].stdout.strip() == "hello" and result.answer == "carried on"


@NEEDS_BWRAP
def test_a_warm_spare_and_a_kept_session_outlive_the_run_that_started_them() -> None:
    """bubblewrap ties a sandbox to the thread that started it (--die-with-parent); every run has its own worker
    thread, so kernels are started from one thread that lives as long as the process."""
    import time

    from rlmnb._sandbox.kernel.warm import pool

    root = ScriptedLM([code("kept = inputs['text'].upper()\nprint(kept)"), code("submit(kept)"),
                       code("print(kept.lower())"), code("submit(kept.lower())")])
    rlm = RLM(root, ScriptedLM(["x"]), sandbox="kernel")
    first = rlm.run("Shout it", text="abc", keep_session=True)
    try:
        assert pool.wait_idle(60)
        time.sleep(0.5)  # the run's worker thread is gone by now
        spare = pool.spare()
        assert spare is not None and spare.alive()
        second = rlm.run("Now whisper it", continue_from=first)
        assert (first.answer, second.status, second.answer) == ("ABC", "submitted", "abc")
    finally:
        if first.session is not None:
            first.session.close()
