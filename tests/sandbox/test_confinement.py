"""The kernel sandbox as a security boundary: an attack suite and a legitimate-work suite.

The host side runs in a subprocess started the way users start Jupyter: its environment holds a canary
`OPENAI_API_KEY`, its HOME is a temp dir with `.ssh/id_rsa` and `.aws/credentials`, and its working
folder (the "notebook's folder") holds a `.env`. Nothing is set at run time. Each attempt in ATTACKS is
one turn of one run; each must fail with an observation saying the access was refused, the run must
carry on to its answer, and no canary may appear anywhere in the trajectory. LEGIT lists what real
work needs; add a row to either table to extend the suite.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import REFUSED, code

from rlmnb import RLM
from rlmnb._ground.errors import ConfigError
from rlmnb._sandbox.confinement import policy as confinement
from rlmnb._sandbox.kernel.warm import pool
from rlmnb.events import CodeExecuted, RunStarted
from rlmnb.testing import ScriptedLM

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(confinement.support()[1] != "", reason="no Landlock ABI 4 + seccomp here")]
ROOT = str(Path(__file__).resolve().parents[2])

# (name, code): @HOME@, @WORK@, @PORT@ and @TMP@ are filled in; each must end in a refusal (REFUSED): Landlock and
# seccomp say EPERM/EACCES; in the sandbox's own namespaces what is out of reach does not exist (ENOENT, ESRCH,
# ENETUNREACH, or ECONNREFUSED from its own empty loopback)
ATTACKS: list[tuple[str, str]] = [
    ("host environ", "open(f'/proc/{os.getppid()}/environ', 'rb').read()"),
    ("list /proc", "print(os.listdir('/proc'))"),
    ("every /proc/<pid>/environ (the spare kernel's too)",
     "got = []\nfor pid in range(1, max(os.getpid(), os.getppid()) + 5000):\n"
     "    if pid != os.getpid():\n        try:\n            got.append(open(f'/proc/{pid}/environ', 'rb').read())\n"
     "        except OSError:\n            pass\nprint(got)\n"
     "if not got:\n    raise PermissionError('every /proc/<pid>/environ was refused')"),
    ("ssh key", "print(open('@HOME@/.ssh/id_rsa').read())"),
    ("ssh key via ~", "print(open(os.path.expanduser('~/.ssh/id_rsa')).read())"),
    ("aws credentials", "print(open('@HOME@/.aws/credentials').read())"),
    ("notebook .env", "print(open('@WORK@/.env').read())"),
    ("list home", "print(os.listdir('@HOME@'))"),
    ("connect to a local listener", "import socket\nsocket.create_connection(('127.0.0.1', @PORT@), timeout=5)"),
    ("listening socket", "import socket\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()"),
    ("listen without bind", "import socket\nsocket.socket().listen()"),
    ("udp", "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', @PORT@))"),
    ("unix socket", "import socket\nsocket.socket(socket.AF_UNIX).connect('/run/dbus/system_bus_socket')"),
    ("write the notebook folder", "open('@WORK@/pwned.txt', 'w').write('x')"),
    ("write /tmp", "open('@TMP@', 'w').write('x')"),
    ("ctypes open", "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                    "fd = libc.open(b'@HOME@/.aws/credentials', 0)\n"
                    "if fd < 0:\n    raise OSError(ctypes.get_errno(), 'open')\n"
                    "print(os.read(fd, 200))"),
    ("ctypes ptrace", "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                      "if libc.ptrace(16, os.getppid(), 0, 0) != 0:\n    raise OSError(ctypes.get_errno(), 'ptrace')"),
    ("os.system", "status = os.system('cat @HOME@/.ssh/id_rsa > copied.txt 2>/dev/null')\n"
                  "print(open('copied.txt').read())\n"
                  "if status:\n    raise PermissionError(f'cat exited with {status}')"),
    ("a new thread", "import threading\nbox = []\n"
                     "t = threading.Thread(target=lambda: box.append(open('@HOME@/.ssh/id_rsa').read()))\n"
                     "t.start(); t.join()\n"
                     "if not box:\n    raise PermissionError('the thread could not read it')\nprint(box)"),
    ("signal the host", "import signal\nos.kill(os.getppid(), signal.SIGTERM)"),
    ("probe the host with signal 0", "os.kill(os.getppid(), 0)"),
    ("signal 0 to the test process", "os.kill(@TESTPID@, 0)"),
    ("SIGUSR1 to the test process", "import signal\nos.kill(@TESTPID@, signal.SIGUSR1)"),
    ("kill an unrelated process", "import signal\nos.kill(@SLEEPPID@, signal.SIGKILL)"),
    ("a pidfd on the host", "import signal\nsignal.pidfd_send_signal(os.pidfd_open(os.getppid()), signal.SIGTERM)"),
    ("MPTCP over IPv4", "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)\n"
                        "s.connect(('127.0.0.1', @PORT@))\ns.sendall(inputs['text'].encode())"),
    ("MPTCP over IPv6", "import socket\ns = socket.socket(socket.AF_INET6, socket.SOCK_STREAM, 262)\n"
                        "s.connect(('::1', @PORT6@))\ns.sendall(inputs['text'].encode())"),
    ("TCP Fast Open by sendto", "import socket\n"
                                "socket.socket().sendto(inputs['text'].encode(), socket.MSG_FASTOPEN, ('127.0.0.1', @PORT@))"),
    ("TCP Fast Open by sendmsg", "import socket\nsocket.socket().sendmsg([inputs['text'].encode()], [], "
                                 "socket.MSG_FASTOPEN, ('127.0.0.1', @PORT@))"),
    ("TCP_FASTOPEN_CONNECT", "import socket\ns = socket.socket()\ns.setsockopt(socket.IPPROTO_TCP, 30, 1)\n"
                             "s.connect(('127.0.0.1', @PORT@))\ns.sendall(inputs['text'].encode())"),
    # issue 43's review: by address, not port; the host's sys.path; other processes without a signal; root's
    # calls; datagrams to any socket file; the transfer folder in the host's /dev/shm
    ("another loopback address", "import socket\nsocket.create_connection(('127.0.0.2', @PORT@), timeout=5)"),
    ("IPv6 loopback", "import socket\nsocket.create_connection(('::1', @PORT6@), timeout=5)"),
    ("a folder on the host's sys.path", "print(open('@SYSPATH@/.env').read())"),
    ("prlimit the test process", "import resource\nresource.prlimit(@TESTPID@, resource.RLIMIT_CPU, (1, 1))"),
    ("pin the test process to one CPU", "os.sched_setaffinity(@TESTPID@, {0})"),
    ("reboot", "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
               "if libc.reboot(0x4321FEDC) != 0:\n    raise OSError(ctypes.get_errno(), 'reboot')"),
    ("read the kernel log", "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nbuf = ctypes.create_string_buffer(4096)\n"
                            "if libc.klogctl(3, buf, 4096) < 0:\n    raise OSError(ctypes.get_errno(), 'syslog')"),
    ("swapoff", "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                "if libc.swapoff(b'/swapfile') != 0:\n    raise OSError(ctypes.get_errno(), 'swapoff')"),
    ("a unix datagram to a socket file", "import socket\na, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
                                         "a.sendto(b'x', '@DGRAM@')"),
    ("fill /dev/shm", "open('/dev/shm/fill', 'wb').write(b'x' * (300 << 20))"),
    ("write into the transfer folder", "import rlmnb._sandbox.kernel.side as side\n"
                                       "open(side.runtime.bridge.settings['inbox'] + '/junk', 'wb').write(b'x' * 10**6)"),
]
# the transfer folder is the fallback's outbox (kernel -> host values): only a namespaced kernel sees it read-only
NAMESPACES_ONLY = {"write into the transfer folder"}
LAYERS = ["namespaces", "fallback"]
ACTIVE = {"namespaces": "namespaces+landlock+seccomp", "fallback": "landlock+seccomp"}
SCTP = ("SCTP", "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 132)\n"
                "s.connect(('127.0.0.1', @PORT@))\ns.sendall(inputs['text'].encode())")

# (name, code, expected stdout)
LEGIT: list[tuple[str, str, str]] = [
    ("pandas and pyarrow", "import pandas as pd, pyarrow as pa, pyarrow.parquet as pq\nprint('imports ok')", "imports ok"),
    ("text", "print(inputs['text'][:5])", "hello"),
    ("a text file in the user's folder", "print(inputs['notes'].strip())", "notes body"),
    ("a DataFrame (via /dev/shm)", "print(int(inputs['df']['x'].sum()))", "6"),
    ("a Parquet file (a DuckDB relation)", "print(len(inputs['table'].df()))", "3"),
    ("a Parquet folder (one table)", "print(len(inputs['folder'].df()))", "5"),
    ("sql() over a Parquet folder in the user's folder", "print(int(sql('SELECT count(*) AS n FROM folder').n[0]))",
     "5"),
    ("llm_query through the broker", "print(llm_query('ping'))", "pong"),
    ("writing in the temp dir", "import tempfile\nopen('scratch.txt', 'w').write('kept')\n"
                                "with tempfile.NamedTemporaryFile('w', delete=False) as f:\n    f.write('x')\n"
                                "print(open('scratch.txt').read(), os.path.dirname(f.name) in (os.getcwd(), "
                                "os.environ.get('TMPDIR')))",
     "kept True"),
]

_HOST = '''
import json, os, sys
from pathlib import Path
import pandas as pd
from rlmnb import RLM
from rlmnb.testing import ScriptedLM

spec = json.loads(sys.argv[1])
if spec["layers"] == "fallback":  # as on a system without user namespaces: Landlock and seccomp alone
    import rlmnb._sandbox.confinement.policy as policy
    policy.no_namespaces = lambda: "user namespaces are off here (forced by the test)"
sys.path.insert(0, spec["syspath"])  # as Jupyter puts the notebook's folder, or `sys.path.insert(0, '..')`
lm = ScriptedLM(spec["replies"])
rlm = RLM(lm, ScriptedLM(["pong"] * 10), max_iterations=len(spec["replies"]), timeout=60)
result = rlm.run("probe", text="hello world", notes=Path("notes.txt"), df=pd.DataFrame({"x": [1, 2, 3]}),
                 table=Path("table.parquet"), folder=Path("pq_folder"))
Path(spec["out"]).write_text(json.dumps({"answer": result.answer, "status": result.status,
                                         "trajectory": result.trajectory.to_dict()}))
'''


@pytest.fixture
def launch_env(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Canaries in a real launching environment: env key, temp HOME with keys, a .env in the work folder."""
    import pandas as pd

    tag = uuid.uuid4().hex
    home, work = tmp_path / "home", tmp_path / "notebooks"
    (home / ".ssh").mkdir(parents=True)
    (home / ".aws").mkdir()
    work.mkdir()
    canaries = {"key": f"sk-canary-{tag}", "ssh": f"SSH-CANARY-{tag}", "aws": f"AWS-CANARY-{tag}",
                "env": f"DOTENV-CANARY-{tag}", "syspath": f"SYSPATH-CANARY-{tag}"}
    syspath = tmp_path / "project"
    syspath.mkdir()
    (syspath / ".env").write_text(f"TOKEN={canaries['syspath']}\n")
    dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    dgram_path = str(tmp_path / "dgram.sock")
    dgram.bind(dgram_path)
    (home / ".ssh" / "id_rsa").write_text(canaries["ssh"])
    (home / ".aws" / "credentials").write_text(f"[default]\naws_secret_access_key = {canaries['aws']}\n")
    (work / ".env").write_text(f"OPENAI_API_KEY={canaries['env']}\n")
    (work / "notes.txt").write_text("notes body\n")
    pd.DataFrame({"a": [1, 2, 3]}).to_parquet(work / "table.parquet")
    (work / "pq_folder").mkdir()
    pd.DataFrame({"a": [1, 2]}).to_parquet(work / "pq_folder" / "part-0.parquet")
    pd.DataFrame({"a": [3, 4, 5]}).to_parquet(work / "pq_folder" / "part-1.parquet")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener6 = socket.socket(socket.AF_INET6)
    listener6.bind(("::1", 0))
    listener6.listen()
    unrelated = subprocess.Popen(["sleep", "600"])
    received: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: received.append(signum))
    env = {**os.environ, "OPENAI_API_KEY": canaries["key"], "HOME": str(home), "PYTHONPATH": ROOT}
    try:
        yield {"home": str(home), "work": str(work), "env": env, "canaries": canaries,
               "port": listener.getsockname()[1], "port6": listener6.getsockname()[1], "tmp": f"/tmp/rlmnb-pwned-{tag}",
               "listeners": (listener, listener6), "unrelated": unrelated, "signals": received,
               "syspath": str(syspath), "dgram_path": dgram_path, "dgram": dgram,
               "affinity": os.sched_getaffinity(0)}
    finally:
        dgram.close()
        signal.signal(signal.SIGUSR1, previous)
        unrelated.kill()
        unrelated.wait()
        listener.close()
        listener6.close()


def _nothing_reached(launch: dict[str, Any]) -> None:
    """No connection reached a listener the sandbox was not allowed to reach, and no signal the test process."""
    for listener in launch["listeners"]:
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert launch["signals"] == [], "the sandbox signalled the test process"
    launch["dgram"].setblocking(False)
    with pytest.raises(BlockingIOError):
        launch["dgram"].recv(16)  # no datagram reached the socket file
    import resource
    assert resource.prlimit(os.getpid(), resource.RLIMIT_CPU)[0] != 1, "the sandbox set the test process's CPU limit"
    assert os.sched_getaffinity(0) == launch["affinity"], "the sandbox pinned the test process"
    assert launch["unrelated"].poll() is None, "the sandbox killed an unrelated process"


def _run_host(launch: dict[str, Any], snippets: list[str], tmp_path: Path, layers: str = "namespaces") -> dict[str, Any]:
    out = tmp_path / "result.json"
    fill = {"@HOME@": launch["home"], "@WORK@": launch["work"], "@PORT@": str(launch["port"]), "@TMP@": launch["tmp"],
            "@SYSPATH@": launch["syspath"], "@DGRAM@": launch["dgram_path"],
            "@PORT6@": str(launch["port6"]), "@TESTPID@": str(os.getpid()), "@SLEEPPID@": str(launch["unrelated"].pid)}
    replies = []
    for snippet in snippets:
        for token, value in fill.items():
            snippet = snippet.replace(token, value)
        replies.append(code("import os\n" + snippet))
    replies.append(code("submit('carried on')"))
    spec = json.dumps({"replies": replies, "out": str(out), "syspath": launch["syspath"], "layers": layers})
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_HOST), spec], cwd=launch["work"], env=launch["env"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for canary in launch["canaries"].values():
        assert canary not in proc.stdout + proc.stderr
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def _executed(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in data["trajectory"]["events"] if e["kind"] == CodeExecuted.kind]


@pytest.mark.parametrize("layers", LAYERS)
def test_every_attack_is_refused_and_the_run_carries_on(launch_env: dict[str, Any], tmp_path: Path, layers: str) -> None:
    attacks = [(name, snippet) for name, snippet in ATTACKS if layers == "namespaces" or name not in NAMESPACES_ONLY]
    data = _run_host(launch_env, [snippet for _, snippet in attacks], tmp_path, layers)
    assert (data["status"], data["answer"]) == ("submitted", "carried on")
    text = json.dumps(data)
    for name, canary in launch_env["canaries"].items():
        assert canary not in text, f"the {name} canary leaked"
    started = next(e for e in data["trajectory"]["events"] if e["kind"] == RunStarted.kind)
    assert started["confinement"]["active"] == ACTIVE[layers]
    executed = _executed(data)
    for (name, _), event in zip(attacks, executed, strict=False):
        assert event["error_type"] in REFUSED, f"{name}: {event['error']}"
        assert "The sandbox refused an access" in event["observation"], name
        assert not event["restarted"], name
    assert len(executed) == len(attacks) + 1
    assert not os.path.exists(os.path.join(launch_env["work"], "pwned.txt"))
    assert not os.path.exists(launch_env["tmp"])
    _nothing_reached(launch_env)


PLANT_LINKS = """\
import os
from ipykernel.kernelapp import IPKernelApp
import rlmnb._sandbox.kernel.side as side
app = IPKernelApp.instance()
folders = {os.getcwd(), os.environ.get('TMPDIR'), os.environ.get('IPYTHONDIR'), side.runtime.mirror_dir,
           side.runtime.bridge.settings['transfer_dir'], side.runtime.bridge.settings.get('inbox'),
           os.path.dirname(app.ip), os.path.dirname(app.connection_file)}
names = ['stdout.mirror', 'stderr.mirror', 'kernel.log', 'manifest1.json', 'manifest2.json', 'warm', 'policy.json',
         'kernel.json']
print('the mirrors exist now')
planted = 0
for folder in filter(None, folders):
    for i, name in enumerate(names):
        path = os.path.join(folder, name)
        try:
            if os.path.lexists(path):
                os.remove(path)
            os.symlink(['@HOME@/.ssh/id_rsa', '@WORK@/big.bin'][i % 2], path)
            planted += 1
        except OSError:
            pass
os.write(1, f'planted {planted}'.encode())
os._exit(1)
"""


@pytest.mark.parametrize("layers", LAYERS)
def test_the_host_never_follows_a_link_the_sandbox_planted(launch_env: dict[str, Any], tmp_path: Path,
                                                           layers: str) -> None:
    """Links at every name the host reads or writes in any folder the kernel can write, to a secret and to a
    large user file, then the kernel dies (the host reads its output mirrors): the host shows no secret,
    cuts or overwrites no user file, and the run carries on in a new kernel."""
    big = Path(launch_env["work"]) / "big.bin"
    big.write_bytes(os.urandom(1024) * 8 * 1024)
    before = big.read_bytes()
    data = _run_host(launch_env, [PLANT_LINKS, "print('after', inputs['text'])"], tmp_path, layers)
    assert (data["status"], data["answer"]) == ("submitted", "carried on")
    executed = _executed(data)
    assert executed[0]["restarted"] and executed[0]["error_type"] == "KernelDied"
    assert executed[1]["stdout"].strip() == "after hello world"
    text = json.dumps(data)
    assert launch_env["canaries"]["ssh"] not in text
    assert big.read_bytes() == before


def _sctp_available() -> bool:
    try:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM, 132).close()
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _sctp_available(), reason="this kernel has no SCTP (an unconfined process cannot make an "
                                                  "SCTP socket either), so there is no SCTP to refuse (allowed in CI)")
def test_sctp_is_refused_where_the_kernel_has_it(launch_env: dict[str, Any], tmp_path: Path) -> None:
    data = _run_host(launch_env, [SCTP[1]], tmp_path)
    assert (data["status"], data["answer"]) == ("submitted", "carried on")
    event = _executed(data)[0]
    assert event["error_type"] == "PermissionError", event["error"]
    assert "The sandbox refused an access" in event["observation"]
    _nothing_reached(launch_env)


def test_legitimate_work_still_runs(launch_env: dict[str, Any], tmp_path: Path) -> None:
    data = _run_host(launch_env, [snippet for _, snippet, _ in LEGIT], tmp_path)
    assert data["status"] == "submitted"
    for (name, _, expected), event in zip(LEGIT, _executed(data), strict=False):
        assert event["error"] is None, f"{name}: {event['error']}"
        assert event["stdout"].strip() == expected, name


@pytest.fixture
def cluster() -> Iterator[str]:
    distributed = pytest.importorskip("distributed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp", host="127.0.0.1",
                                      dashboard_address=None) as c:
            yield c.scheduler_address


_DASK = "from distributed import Client\nc = Client('{addr}', timeout=20)\nprint(c.submit(sum, [1, 2, 3]).result())\n"


def test_a_dask_scheduler_is_reachable_only_when_allowed(cluster: str) -> None:
    address = cluster.removeprefix("tcp://")
    refused = RLM(ScriptedLM([code(_DASK.format(addr=cluster)), code("submit(1)")]), max_iterations=2).run("q")
    first = [e for e in refused.trajectory.events if isinstance(e, CodeExecuted)][0]
    assert first.error is not None and "6" not in first.stdout
    allowed = RLM(ScriptedLM([code(_DASK.format(addr=cluster)), code("submit(1)")]), max_iterations=2,
                  allow_network=[address]).run("q")
    first = [e for e in allowed.trajectory.events if isinstance(e, CodeExecuted)][0]
    assert first.error is None, first.error
    assert first.stdout.strip() == "6"


def test_allow_paths_widen_reading_and_writing_on_purpose(tmp_path: Path) -> None:
    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    out.mkdir()
    (data / "a.txt").write_text("readable")
    script = [code(f"print(open('{data}/a.txt').read())"), code(f"open('{data}/b.txt', 'w')"),
              code(f"open('{out}/c.txt', 'w').write('written')"), code("submit(1)")]
    lm = ScriptedLM(script)
    result = RLM(lm, max_iterations=4, allow_paths=[str(data), f"{out}:rw"]).run("q")
    executed = [e for e in result.trajectory.events if isinstance(e, CodeExecuted)]
    assert executed[0].stdout.strip() == "readable"
    assert executed[1].error_type in REFUSED  # read-only unless marked :rw
    assert executed[2].error is None and (out / "c.txt").read_text() == "written"
    started = next(e for e in result.trajectory.events if isinstance(e, RunStarted))
    assert started.confinement is not None and started.confinement["allow_paths"] == [f"{data}:ro", f"{out}:rw"]
    assert f"{out}:rw" in lm.requests[0][1]["content"]  # the model is told what it may reach


def test_without_support_auto_says_so_every_run_and_required_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    confinement.probe.cache_clear()
    monkeypatch.setattr(confinement.landlock, "abi_version", lambda: 0)
    monkeypatch.setattr(confinement.seccomp, "available", lambda: False)
    monkeypatch.setattr(confinement, "no_namespaces", lambda: "user namespaces are off here (faked)")
    try:
        with pytest.raises(ConfigError, match="confinement='required' but not enforced: files"):
            RLM(ScriptedLM([]), confinement="required")
        script = [code("import os\nprint(os.listdir(os.path.expanduser('~')) is not None)"), code("submit(1)")]
        for _ in range(2):  # said in every run's record, not once per process
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                result = RLM(ScriptedLM(script), max_iterations=2).run("q")
            assert [e.stdout.strip() for e in result.trajectory.events if isinstance(e, CodeExecuted)][0] == "True"
            assert result.confinement is not None and result.confinement.active == "none"
            assert "neither Landlock" in result.confinement.reason and not result.confinement.complete
            assert {g.name for g in result.confinement.missing} == set(confinement.GUARDS)
    finally:
        confinement.probe.cache_clear()
        pool.shutdown(reopen=True)


def test_bad_widening_settings_are_one_sentence() -> None:
    with pytest.raises(ConfigError, match="host:port"):
        RLM(ScriptedLM([]), allow_network=["nowhere"])
    with pytest.raises(ConfigError, match="nothing at"):
        RLM(ScriptedLM([]), allow_paths=["/no/such/dir"])
    with pytest.raises(ConfigError, match="confinement must be one of"):
        RLM(ScriptedLM([]), confinement="strict")


def test_the_magic_sets_and_reports_confinement(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    sh = InteractiveShell.instance()
    sh.reset(new_session=False)
    sh.config.pop("RLMMagics", None)
    sh.run_line_magic("load_ext", "rlmnb")
    try:
        sh.user_ns["root"] = ScriptedLM([code("print(2)"), code("submit(2)")])
        sh.run_line_magic("config", f"RLMMagics.allow_paths = [{str(tmp_path)!r}]")
        sh.run_line_magic("rlm", "config")
        report = capsys.readouterr().out
        assert re.search(r"confinement active\s+namespaces\+landlock\+seccomp", report) and f"path {tmp_path}:ro" in report
        assert re.search(r"allow_paths\s+\[" + re.escape(repr(str(tmp_path))) + r"\]", report), report
        sh.run_cell_magic("rlm", f"-m root --quiet --confinement required --allow-path {tmp_path}:rw "
                                 "--allow-network 127.0.0.1:9 --allow-network 127.0.0.1:10", "q")
        started = next(e for e in sh.user_ns["_rlm"].trajectory.events if isinstance(e, RunStarted))
        assert started.config["confinement"] == "required"
        assert started.config["allow_paths"] == [f"{tmp_path}:rw"]
        assert started.config["allow_network"] == ["127.0.0.1:9", "127.0.0.1:10"]
        assert started.confinement is not None and started.confinement["active"] == "namespaces+landlock+seccomp"
    finally:
        sh.run_line_magic("unload_ext", "rlmnb")
        sh.config.pop("RLMMagics", None)
        sh.reset(new_session=False)


def test_the_widget_header_says_whether_the_sandbox_is_confined() -> None:
    from rlmnb._notebook.widget import confinement_html
    from rlmnb.views import RunTree

    result = RLM(ScriptedLM([code("print(1)"), code("submit(2)")]), max_iterations=2,
                 allow_network=["127.0.0.1:9"]).run("q")
    tree = RunTree()
    for event in result.trajectory.events:
        tree.add(event)
    line = confinement_html(tree.run_view())
    assert "sandbox confined (namespaces+landlock+seccomp); allowed: 127.0.0.1:9" in line
    assert "not confined: the local sandbox" in confinement_html(
        {"sandbox": "kernel", "confinement": {"active": "none", "reason": "the local sandbox ..."}})


class _FieldWithNeeds:
    """A bound input as the inputs package describes one that lives elsewhere (read_paths, endpoints)."""

    def __init__(self, field: Any, read_paths: tuple[str, ...], endpoints: tuple[str, ...]) -> None:
        self._field, self.read_paths, self.endpoints = field, read_paths, endpoints

    def __getattr__(self, name: str) -> Any:
        return getattr(self._field, name)


def test_field_read_paths_and_endpoints_are_reachable_and_spares_are_reused(tmp_path: Path) -> None:
    import asyncio

    from sandbox_support import EchoHost

    from rlmnb._ground.config import RLMConfig
    from rlmnb._sandbox.kernel.sandbox import KernelSandbox
    from rlmnb.inputs import bind_inputs

    dataset = tmp_path / "dataset"
    dataset.mkdir()
    (dataset / "part.txt").write_text("from a dataset root")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    fields, _ = bind_inputs({"name": "x"}, RLMConfig())
    wrapped = [_FieldWithNeeds(fields[0], (str(dataset),), (f"127.0.0.1:{port}",))]
    probe = (f"import socket\nprint(open('{dataset}/part.txt').read())\n"
             f"socket.create_connection(('127.0.0.1', {port}), timeout=5).close()\nprint('reached')")

    async def one() -> tuple[str, bool]:
        sandbox = KernelSandbox()
        try:
            await sandbox.start(EchoHost(asyncio.get_running_loop()))
            await sandbox.bind(wrapped)  # type: ignore[arg-type]
            result = await sandbox.execute(probe, 30)
            assert result.error is None, result.error
            return result.stdout, sandbox.restarts == 0
        finally:
            await sandbox.close()

    try:
        pool.shutdown(reopen=True)
        assert asyncio.run(one()) == ("from a dataset root\nreached\n", True)
        assert pool.wait_idle(60) and pool.has_spare
        hits = pool.hits
        assert asyncio.run(one())[0] == "from a dataset root\nreached\n"
        assert pool.hits == hits + 1  # the spare was made under these inputs' rules, so it was taken
    finally:
        listener.close()
        pool.shutdown(reopen=True)


def test_a_later_input_outside_the_rules_restarts_the_kernel_and_says_so(tmp_path: Path) -> None:
    import asyncio

    from sandbox_support import EchoHost

    from rlmnb._ground.config import RLMConfig
    from rlmnb._sandbox.kernel.sandbox import KernelSandbox
    from rlmnb.inputs import bind_inputs

    (tmp_path / "later.txt").write_text("later body")
    first, _ = bind_inputs({"text": "hello"}, RLMConfig())
    later, _ = bind_inputs({"later": tmp_path / "later.txt"}, RLMConfig())

    async def scenario() -> tuple[Any, Any, Any]:
        sandbox = KernelSandbox(warm=False)
        try:
            await sandbox.start(EchoHost(asyncio.get_running_loop()))
            await sandbox.bind(first)
            await sandbox.execute("x = 1", 30)
            covered = await sandbox.execute(f"open({str(tmp_path / 'later.txt')!r}).read()", 30)
            await sandbox.bind(later)  # a --continue cell with a new file input
            after = await sandbox.execute("print(inputs['later'], inputs['text'])\nprint(x)", 30)
            return covered, after, sandbox.restarts
        finally:
            await sandbox.close()

    covered, after, restarts = asyncio.run(scenario())
    assert covered.error_type in REFUSED
    assert after.stdout.strip() == "later body hello" and after.error_type == "NameError"
    assert restarts == 1 and after.notice is not None and "may read the new input(s) 'later'" in after.notice

