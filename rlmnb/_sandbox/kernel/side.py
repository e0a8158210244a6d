"""The part of the kernel sandbox that runs inside the sandbox kernel.

The host drives it with short calls (`__rlmnb__.configure(...)`, `.bind(path)`, `.run(turn, step, code)`) and
reads each call's reply through the `reply()` user expression. Snippets run through
`runner.run_snippet` in a namespace of their own (never IPython's `user_ns`), with the same
primitives (`primitives.install`) and the same `inputs` mapping (`local.LazyInputs`) as the local
sandbox, so errors, echoes and submissions read the same in both. Printing is captured here in
`BoundedBuffer`s, so a snippet printing 100 MB never sends more than the kept head and tail:
`OutputRouter` stands in for `sys.stdout`/`sys.stderr` so every write lands in the current snippet's
buffer, and `MirroredBuffer` also copies the first characters to a file, so the host can still show
them when the kernel dies mid-snippet, and hands them to `OutputStreamer`, which sends them to the host
through the broker's "output" op a few times a second while the snippet runs (a view shows them before the
turn ends; a turn cut short keeps them).

Model calls go to the host over the loopback broker: one TCP connection per call (see bridge.py).
Inputs arrive as files (see transfer.py) and load on first access.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import itertools
import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from rlmnb._ground import errors as rlm_errors
from rlmnb._ground.images import Image
from rlmnb._sandbox.bridge import MIME, REPLY_BYTES, TooLarge, connect, opening, pack, recv_frame, too_large
from rlmnb._sandbox.local import STREAM_INTERVAL_S, LazyInputs, StreamedOutput, sandbox_builtins
from rlmnb._sandbox.primitives import install, user_variables
from rlmnb._sandbox.runner import BoundedBuffer, run_snippet, snippet_filename
from rlmnb._sandbox.transfer import decode_value, encode_value, load_spec, write_image


class OutputRouter:
    """Stands in for sys.stdout/sys.stderr: every write goes to the current snippet's bounded buffer.

    Between snippets (background threads) writes go to a spare buffer that opens the next snippet's output.
    """

    def __init__(self, original: Any, limit: int) -> None:
        self.original = original
        self.limit = limit
        self.lock = threading.Lock()
        self.sink = BoundedBuffer(limit)

    def swap(self, sink: BoundedBuffer) -> BoundedBuffer:
        with self.lock:
            old, self.sink = self.sink, sink
        return old

    def write(self, text: str) -> int:
        with self.lock:
            return self.sink.write(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:
        return "utf-8"

    @property
    def errors(self) -> str:
        return "strict"

    def fileno(self) -> int:
        return int(self.original.fileno())


class MirroredBuffer(BoundedBuffer):
    """A snippet's output buffer whose first `limit` characters also go straight to a file, so the host
    can still show them when the kernel dies or is replaced before the snippet returns, and, with
    `streamed`, to the output streamed to the host while the snippet runs (as `stream`)."""

    def __init__(self, limit: int, path: str | None, streamed: StreamedOutput | None = None,
                 stream: str = "stdout") -> None:
        super().__init__(limit)
        self.path = path
        self.room = limit if path else 0
        self.fd: int | None = None
        self.streamed, self.stream = streamed, stream

    def write(self, text: str) -> int:
        if self.streamed is not None:
            self.streamed.write(self.stream, str(text))
        if self.room > 0:
            piece = str(text)[:self.room]
            self.room -= len(piece)
            if self.fd is None:
                self.fd = _fresh_file(str(self.path))
            if self.fd is None:
                self.room = 0  # no mirror this time (model code took the name): the output itself is unaffected
            else:
                os.write(self.fd, piece.encode("utf-8", "replace"))
        return super().write(text)

    def discard(self) -> None:
        """The snippet returned normally: its output travels in the reply, the mirror is not needed."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
            with contextlib.suppress(OSError):
                os.unlink(str(self.path))


def _fresh_file(path: str) -> int | None:
    """A new file at `path` for writing, never through whatever model code left there (a link, a FIFO), or None."""
    with contextlib.suppress(OSError):
        os.unlink(path)
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return None


class Reply:
    """What a user expression hands back: a JSON string under our own MIME type."""

    def __init__(self, payload: str) -> None:
        self.payload = payload

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {MIME: self.payload}

    def __repr__(self) -> str:
        return "<rlmnb reply>"


class OutputStreamer:
    """Sends the running snippet's output to the host (the broker's "output" op) from a thread of its own.

    A quarter of a second's output at most travels as one piece (STREAM_INTERVAL_S), so a snippet printing in
    a tight loop costs a few calls a second; only the head of a long output streams (StreamedOutput's
    limit). Each piece is tagged with the turn and step it was printed in; the host drops a piece of a turn
    that is no longer running. Nothing waits on it: a send that fails or stalls loses only that piece.
    """

    def __init__(self, bridge: SocketBridge) -> None:
        self.bridge = bridge
        self.current: tuple[StreamedOutput, int, int] | None = None
        self.wake = threading.Event()
        self.thread: threading.Thread | None = None

    def begin(self, turn: int, step: int, limit: int) -> StreamedOutput:
        """A fresh StreamedOutput for the snippet of `turn` and `step`, streamed until `end`."""
        streamed = StreamedOutput(limit)
        self.current = (streamed, turn, step)
        self.wake.set()
        if self.thread is None:
            self.thread = threading.Thread(target=self._loop, name="rlmnb-output", daemon=True)
            self.thread.start()
        return streamed

    def end(self) -> None:
        """The snippet returned: its output travels in the reply; nothing more of it is sent."""
        current, self.current = self.current, None
        if current is not None:
            current[0].close()

    def _loop(self) -> None:
        while True:
            current = self.current
            if current is None:  # between snippets: sleep until the next one begins
                self.wake.wait()
                self.wake.clear()
                continue
            if not current[0].ready.wait(1.0):
                continue  # nothing printed yet: look again (once a second while a silent snippet runs)
            time.sleep(STREAM_INTERVAL_S)  # gather what else is printed meanwhile into the same piece
            streamed, turn, step = current
            for stream, text in streamed.take():
                try:
                    self.bridge.call("output", stream=stream, text=text, turn=turn, step=step)
                except Exception:  # the host gave up on the step, or is gone: this piece is lost, the snippet is not
                    break


# ---- the bridge client ----------------------------------------------------------------------------------
class HostCallDropped(RuntimeError):
    """The host gave no answer: the turn this call belongs to timed out or the run ended."""


class SocketBridge:
    """SyncBridge over the broker's socket (Unix, or loopback TCP): one connection per call, tagged with the
    run, the turn and the step."""

    def __init__(self) -> None:
        self.settings: dict[str, Any] = {}
        self.turn = 0
        self.step = 0
        self._ids = itertools.count(1)

    def call(self, op: str, **payload: Any) -> Any:
        s = self.settings
        turn, step = payload.pop("turn", self.turn), payload.pop("step", self.step)
        req = {"run": s["run"], "turn": turn, "step": step, "id": next(self._ids), "op": op,
               **payload}
        try:
            frame = opening(s["secret"]) + pack(req)
        except TooLarge as exc:  # refused here, before anything is sent: the broker would not read it
            raise ValueError(too_large(op, payload, exc)) from None
        with connect(s) as sock:
            sock.sendall(frame)
            try:
                reply = recv_frame(sock)
            except (OSError, ValueError) as exc:
                raise HostCallDropped(f"{op}() got no answer from the host: the run ended or this step timed out "
                                      f"({exc}).") from None
        if not isinstance(reply, dict) or (reply.get("id"), reply.get("run"), reply.get("step")) != (
                req["id"], s["run"], step):
            raise HostCallDropped(f"{op}() got a reply meant for another call; it was ignored.")
        if not reply.get("ok"):
            raise rebuild_error(reply.get("error") or {})
        return reply.get("value")

    def llm_query(self, prompt: str, model: str | None = None, images: list[Image] | None = None) -> str:
        if images is None:
            return str(self.call("llm_query", prompt=prompt, model=model))
        return str(self.call("llm_query", prompt=prompt, model=model, images=self._images(images)))

    def llm_query_batched(self, prompts: list[str], model: str | None = None,
                          images: list[list[Image]] | None = None) -> list[str]:
        if images is None:
            return [str(r) for r in self.call("llm_query_batched", prompts=prompts, model=model)]
        return [str(r) for r in self.call("llm_query_batched", prompts=prompts, model=model,
                                          images=[self._images(x) for x in images])]

    def _images(self, images: list[Image]) -> list[dict[str, str | None]]:
        """Each image (and its thumbnail) as files in the transfer directory, never inline in the frame;
        the host deletes them."""
        folder = self.settings["transfer_dir"]
        return [{"image": write_image(i.data, folder), "thumb": write_image(i.thumb, folder) if i.thumb else None}
                for i in images]

    def rlm_query(self, prompt: str, inputs: dict[str, Any]) -> Any:
        return self._decode(self.call("rlm_query", prompt=prompt, inputs=self._encode(inputs)))

    def map_begin(self, info: dict[str, Any]) -> dict[str, Any]:
        return dict(self.call("map_begin", info=info))

    def map_batch(self, map_id: str, prompts: list[str], model: str | None = None,
                  images: list[list[Image]] | None = None) -> list[str]:
        files = None if images is None else [self._images(x) for x in images]
        return [str(r) for r in self.call("map_batch", map_id=map_id, prompts=prompts, model=model, images=files)]

    def map_end(self, map_id: str, figures: dict[str, Any]) -> None:
        self.call("map_end", map_id=map_id, figures=figures)

    def rlm_query_batched(self, prompts: list[str], inputs_list: list[dict[str, Any]] | None) -> list[Any]:
        encoded = None if inputs_list is None else self._encode(inputs_list)
        return list(self._decode(self.call("rlm_query_batched", prompts=prompts, inputs_list=encoded)))

    def tool(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return self._decode(self.call("tool", name=name, args=self._encode(list(args)), kwargs=self._encode(kwargs)))

    def _encode(self, value: Any) -> Any:
        return encode_value(value, self.settings["transfer_dir"], allow_pickle=False)

    def _decode(self, data: Any) -> Any:
        return decode_value(data, self.settings.get("inbox") or self.settings["transfer_dir"], allow_pickle=True)


_error_classes: dict[tuple[str, str], type[Exception]] = {}


def rebuild_error(record: Mapping[str, Any]) -> Exception:
    """The host's exception as the same type where we can (rlmnb errors, builtins), else a look-alike."""
    name, module = str(record.get("type") or "RuntimeError"), str(record.get("module") or "builtins")
    message = str(record.get("message") or "")
    cls: Any = None
    if module == "builtins":
        cls = getattr(builtins, name, None)
    elif module == rlm_errors.__name__:
        cls = getattr(rlm_errors, name, None)
    args = record.get("args")
    args = tuple(args) if isinstance(args, list) else (message,)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(*args)  # type: ignore[no-any-return,unused-ignore]
        except Exception:
            pass
    key = (module, name)
    if key not in _error_classes:
        _error_classes[key] = type(name, (RuntimeError,), {"__module__": module})
    return _error_classes[key](*args)


def tool_proxy(bridge: SocketBridge, name: str, doc: str) -> Callable[..., Any]:
    def tool(*args: Any, **kwargs: Any) -> Any:
        return bridge.tool(name, args, kwargs)

    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = doc or None
    return tool


# ---- the runtime ------------------------------------------------------------------------------------------
class Runtime:
    """One sandbox namespace with its inputs, printing and bridge."""

    def __init__(self) -> None:
        self.bridge = SocketBridge()
        self.fields: dict[str, Any] = {}
        self.specs: dict[str, str] = {}
        self.tools: dict[str, Callable[..., Any]] = {}
        self.max_output_chars = 10_000
        self.mirror_dir: str | None = None
        self.memory_limit: int | None = None
        self.ns: dict[str, Any] = self._fresh()
        self.out: OutputRouter | None = None
        self.err: OutputRouter | None = None
        self.streamer = OutputStreamer(self.bridge)
        self.last = "null"

    def _fresh(self) -> dict[str, Any]:
        ns: dict[str, Any] = {"__name__": "__rlm__", "__builtins__": sandbox_builtins()}
        install(ns, self.bridge, self.tools)
        ns["inputs"] = LazyInputs(list(self.fields.values()))
        return ns

    # ---- host calls ----------------------------------------------------------------------------------
    def configure(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        self.bridge.settings = dict(settings["bridge"])
        self.max_output_chars = int(settings.get("max_output_chars", 10_000))
        self.mirror_dir = settings.get("mirror_dir")
        os.environ.update(settings.get("env") or {})
        self.tools = {name: tool_proxy(self.bridge, name, doc) for name, doc in settings.get("tools", {}).items()}
        install(self.ns, self.bridge, self.tools)
        for stream in ("stdout", "stderr"):
            current = getattr(sys, stream)
            if isinstance(current, OutputRouter):
                current.limit = self.max_output_chars
            else:
                setattr(sys, stream, OutputRouter(current, self.max_output_chars))
        self.out, self.err = sys.stdout, sys.stderr  # type: ignore[assignment]
        limit = settings.get("memory_limit")
        if limit is not None and limit != self.memory_limit:
            self.memory_limit = set_memory_limit(int(limit))
        return {"pid": os.getpid(), "data_bytes": data_bytes()}

    def bind(self, manifest: str) -> dict[str, Any]:
        """Bind the inputs a JSON manifest (the host's specs, sent in the request) describes."""
        from rlmnb.inputs import Field, FieldInfo

        specs = json.loads(manifest)
        for spec in specs:
            name = spec["name"]
            if self.specs.get(name) == spec["path"] and name in self.fields:
                continue
            plan = spec.get("plan")  # a file table's files: sql() names a damaged one
            self.fields[name] = Field(name, spec["path"], FieldInfo.from_dict(spec["info"]), _loader(spec),
                                      plan=plan if isinstance(plan, dict) else None)
            self.specs[name] = spec["path"]
        self.ns["inputs"] = LazyInputs(list(self.fields.values()))
        return {"bound": [s["name"] for s in specs]}

    def run(self, turn: int, step: int, code: str) -> dict[str, Any]:
        assert self.out is not None and self.err is not None
        if sys.stdout is not self.out or sys.stderr is not self.err:
            sys.stdout, sys.stderr = self.out, self.err  # type: ignore[assignment,unused-ignore]
        streamed = self.streamer.begin(turn, step, self.max_output_chars)
        out, err = (MirroredBuffer(self.max_output_chars, os.path.join(self.mirror_dir, f"{stream}.mirror")
                                   if self.mirror_dir else None, streamed, stream) for stream in ("stdout", "stderr"))
        for router, buf in ((self.out, out), (self.err, err)):
            stray = router.swap(buf)
            if stray.total:
                buf.write(stray.getvalue())
        self.bridge.turn, self.bridge.step = turn, step
        started = time.perf_counter()
        outcome = None
        tables: list[dict[str, Any]] = []
        try:
            outcome = run_snippet(code, self.ns, snippet_filename(turn), lambda v: out.write(repr(v) + "\n"), tables,
                                  protected=self.protected())
        finally:
            self.streamer.end()
            self.out.swap(BoundedBuffer(self.max_output_chars))
            self.err.swap(BoundedBuffer(self.max_output_chars))
            result: dict[str, Any] = {"stdout": out.getvalue(), "stderr": err.getvalue(),
                                      "duration_s": time.perf_counter() - started, "interrupted": outcome is None,
                                      "tables": tables}
            if outcome is not None:
                signal = outcome.submit
                result.update(error=outcome.error, error_type=outcome.error_type,
                              interrupted=outcome.interrupted, submitted=signal is not None,
                              answer=signal.value if signal else None,
                              submit_error=signal.error if signal else None,
                              submit_during_exception=signal.during_exception if signal else None)
            self.last = _fitted(result)
            out.discard()
            err.discard()
        return result

    def protected(self) -> set[str]:
        """The names the model's code may not rebind: `inputs`, the primitives and the user's tools."""
        from rlmnb._sandbox.base import RESERVED_NAMES

        return {"inputs", *self.tools, *RESERVED_NAMES}

    def variables(self) -> list[str]:
        return [name for name, _ in user_variables(self.ns, self.protected())]


def _loader(spec: Mapping[str, Any]) -> Callable[[], Any]:
    """How inputs[name] is made from its spec: the same views Field.load() gives on the host."""
    from rlmnb.inputs._registry import kernel_loader

    return kernel_loader(spec, load_spec)


def set_memory_limit(limit: int) -> int:
    """Cap the kernel's data memory (heap and anonymous maps; memory-mapped inputs do not count)."""
    import resource

    used = data_bytes()
    if used and limit < used + 32 * 2**20:
        raise MemoryError(f"memory_limit of {limit:,} bytes is below what the sandbox kernel already uses "
                          f"({used:,} bytes) plus a 32 MiB margin")
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    return limit


def data_bytes() -> int:
    """VmData of this process (what RLIMIT_DATA counts), 0 where /proc is missing."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _dumps(obj: Any) -> str:
    try:
        return json.dumps(obj, ensure_ascii=True, allow_nan=True)
    except (TypeError, ValueError) as exc:
        obj = dict(obj, answer=None, submit_error=f"the value could not be sent to the host ({exc})")
        return json.dumps(obj, ensure_ascii=True, allow_nan=True, default=repr)


def _fitted(result: dict[str, Any]) -> str:
    """A snippet's outcome as its reply JSON, within the REPLY_BYTES the host reads. The values are capped where
    they are made (submit, tables, output buffers); should the whole still be over (a very large
    max_output_chars), the tables go first, then the submitted value (refused, so the model is told), then
    the outputs keep only their heads."""
    text = _dumps(result)
    if len(text) <= REPLY_BYTES:
        return text
    result = dict(result, tables=[])
    text = _dumps(result)
    if len(text) > REPLY_BYTES and result.get("answer") is not None:
        result.update(answer=None, submit_error=f"the value is too large to submit: with this snippet's output "
                                                f"the reply is more than {REPLY_BYTES:,} bytes; submit a smaller "
                                                f"value, or print less")
        text = _dumps(result)
    if len(text) > REPLY_BYTES:
        room = REPLY_BYTES // 32  # characters per stream: 12 bytes each at most, escaped
        result.update(stdout=str(result.get("stdout"))[:room], stderr=str(result.get("stderr"))[:room])
        text = _dumps(result)
    return text


# ---- entry points the host calls ----------------------------------------------------------------------------
runtime = Runtime()


def _entry(fn: Callable[..., Any]) -> Callable[..., None]:
    """Run a host call and keep its JSON reply (or the error) for `reply()`; never raises."""

    def call(*args: Any) -> None:
        try:
            runtime.last = _dumps({"ok": fn(*args)})
        except BaseException as exc:  # noqa: BLE001 - the host reads the failure from the reply
            runtime.last = _dumps({"error": f"{type(exc).__name__}: {exc}", "error_type": type(exc).__name__,
                                   "traceback": traceback.format_exc(limit=-4)})

    return call


configure = _entry(runtime.configure)
bind = _entry(runtime.bind)
variables = _entry(runtime.variables)


def run(turn: int, step: int, code: str) -> None:
    """Run one snippet; the outcome is kept for `reply()` even when an interrupt lands outside it."""
    runtime.last = "null"
    try:
        runtime.run(turn, step, code)
    except BaseException:  # noqa: BLE001 - an interrupt between the snippet and the bookkeeping
        if runtime.last == "null":
            runtime.last = _dumps({"stdout": "", "stderr": "", "interrupted": True, "duration_s": 0.0})


def reply() -> Reply:
    return Reply(runtime.last)


def warm_up() -> None:
    """Import what binding inputs needs, while the kernel waits as the warm spare; then settle the heap.

    Collecting here and freezing what survives (imported modules live as long as the kernel) makes no
    run pay for the imports' garbage collection (docs/decisions/warm-spare-kernel.md).
    """
    import gc

    import numpy  # noqa: F401
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401
    import pyarrow.ipc  # noqa: F401

    from rlmnb.inputs._tables import (
        duck,  # sql() and file tables: DuckDB imported, its database opened, while idle
    )

    duck.cursor().close()

    from rlmnb import inputs  # noqa: F401
    from rlmnb.inputs._registry import families

    families()  # the input families' modules, which the first bind would otherwise import

    gc.collect()
    gc.freeze()
    atexit.register(gc.unfreeze)  # at exit everything is collected as usual (DuckDB's bindings warn otherwise)


def mark_warm(path: str) -> None:
    """The last step of a spare's start-up: tell the host (KernelProcess.warmed) that warming is done."""
    with open(path, "w", encoding="ascii"):
        pass


__all__ = [
    "MirroredBuffer", "OutputRouter", "OutputStreamer", "Reply", "Runtime", "SocketBridge", "bind", "configure", "mark_warm", "reply",
    "run", "runtime", "variables", "warm_up",
]
