"""The local sandbox: a fresh namespace in this process. Fast and zero-copy, NOT a security boundary.

Model code runs in a worker thread with its own namespace (never the user's globals); its prints are
captured per thread and never reach the notebook. The timeout is best effort: an exception is
injected into the worker thread, which stops pure-Python loops but not a blocking C call. For code
you do not trust, use the kernel sandbox, which runs in a separate process.

While a snippet runs, what it prints also streams to the host (`StreamedOutput`, a few pieces a second,
through the host's optional `output(text, stream, turn)`), so a view shows it before the turn ends and a
turn cut short keeps it; the kernel sandbox streams the same way through its broker.
"""

from __future__ import annotations

import asyncio
import builtins
import concurrent.futures
import ctypes
import io
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rlmnb._ground.concurrency import settle
from rlmnb._ground.errors import SandboxError
from rlmnb._ground.images import Image
from rlmnb._sandbox.base import RESERVED_NAMES, ExecResult, SandboxHost
from rlmnb._sandbox.primitives import install, user_variables
from rlmnb._sandbox.runner import BoundedBuffer, SnippetInterrupted, run_snippet, snippet_filename

if TYPE_CHECKING:
    from rlmnb.inputs import Field

_GRACE_S = 2.0
_POLL_S = 0.05
STREAM_INTERVAL_S = 0.25  # a running snippet's output goes to the host at most this often
STREAM_CHUNK_CHARS = 4_000  # characters of one streamed piece at most

OutputSink = Callable[[str, str, int], None]  # SandboxHost.output(text, stream, turn), where a host has it


class StreamedOutput:
    """What a running snippet printed that is still to be streamed to the host. Thread-safe and bounded.

    `write` (any thread) keeps text until `limit` characters have been taken in for this snippet (the
    head of its output; the rest reaches the host with the snippet's result); `take` hands back what is
    pending as (stream, text) pieces of at most `chunk` characters, in the order written. Once `close`d
    it keeps and hands back nothing, so a piece never outlives its snippet.
    """

    def __init__(self, limit: int, chunk: int = STREAM_CHUNK_CHARS) -> None:
        self.room = max(0, limit)
        self.chunk = max(1, chunk)
        self.ready = threading.Event()  # set while something is pending
        self._lock = threading.Lock()
        self._pending: list[tuple[str, str]] = []
        self._closed = False

    def write(self, stream: str, text: str) -> None:
        with self._lock:
            if self._closed or self.room <= 0 or not text:
                return
            piece = text[:self.room]
            self.room -= len(piece)
            if self._pending and self._pending[-1][0] == stream:
                self._pending[-1] = (stream, self._pending[-1][1] + piece)
            else:
                self._pending.append((stream, piece))
            self.ready.set()

    def take(self) -> list[tuple[str, str]]:
        with self._lock:
            pending, self._pending = self._pending, []
            self.ready.clear()
        return [(stream, text[i:i + self.chunk]) for stream, text in pending
                for i in range(0, len(text), self.chunk)]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._pending = []
            self.ready.clear()


class StreamingBuffer(BoundedBuffer):
    """A snippet's output buffer that also hands each write to a `StreamedOutput` (as `stream`)."""

    def __init__(self, limit: int, streamed: StreamedOutput | None, stream: str) -> None:
        super().__init__(limit)
        self.streamed, self.stream = streamed, stream

    def write(self, text: str) -> int:
        if self.streamed is not None:
            self.streamed.write(self.stream, str(text))
        return super().write(text)


def _disabled(name: str) -> Callable[..., Any]:
    def blocked(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError(f"{name}() is not available in the sandbox: nobody is there to answer. "
                           f"Use print() to show results and submit() to finish.")

    blocked.__name__ = name
    return blocked


def sandbox_builtins() -> dict[str, Any]:
    table = dict(vars(builtins))
    for name in ("input", "breakpoint", "exit", "quit", "help", "copyright", "credits", "license"):
        table[name] = _disabled(name)
    return table


class _CaptureRouter(io.TextIOBase):
    """Stands in for sys.stdout/sys.stderr: writes from sandbox threads go to their buffer, others pass through."""

    def __init__(self, original: Any, stream: str) -> None:
        self.original = original
        self.stream = stream
        self.local = threading.local()

    def __getattr__(self, name: str) -> Any:
        # everything else (ipykernel's set_parent, session, ...) is the original stream's business
        return getattr(self.original, name)

    def _sink(self) -> Any:
        return getattr(self.local, "sink", None) or self.original

    def write(self, text: str) -> int:
        return int(self._sink().write(text) or 0)

    def flush(self) -> None:
        sink = self._sink()
        if hasattr(sink, "flush"):
            sink.flush()

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def fileno(self) -> int:
        return int(self.original.fileno())


class _Capture:
    """Installs one router per stream for as long as any local sandbox is open."""

    _lock = threading.Lock()
    _users = 0
    routers: dict[str, _CaptureRouter] = {}

    @classmethod
    def acquire(cls) -> None:
        with cls._lock:
            cls._users += 1
            for name in ("stdout", "stderr"):
                current = getattr(sys, name)
                if not isinstance(current, _CaptureRouter):
                    router = _CaptureRouter(current, name)
                    cls.routers[name] = router
                    setattr(sys, name, router)

    @classmethod
    def release(cls) -> None:
        with cls._lock:
            cls._users = max(0, cls._users - 1)
            if cls._users == 0:
                for name, router in cls.routers.items():
                    if getattr(sys, name) is router:
                        setattr(sys, name, router.original)
                cls.routers = {}

    @classmethod
    def bind_thread(cls, out: BoundedBuffer | None, err: BoundedBuffer | None) -> None:
        for name, sink in (("stdout", out), ("stderr", err)):
            router = cls.routers.get(name)
            if router is not None:
                router.local.sink = sink


class LazyInputs(Mapping[str, Any]):
    """`inputs` in the sandbox: a read-only mapping whose values load on first access."""

    def __init__(self, fields: Sequence[Field]) -> None:
        self._fields = {f.name: f for f in fields}

    def __getitem__(self, name: str) -> Any:
        field = self._fields.get(name)
        if field is None:
            raise KeyError(f"no input named {name!r}; inputs are: {', '.join(self._fields) or 'none'}")
        value = field.load()
        if type(value).__module__.split(".")[0] == "pandas" and hasattr(value, "copy"):
            return value.copy(deep=False)  # copy-on-write: writes stay in this copy, each access starts clean
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def fields(self) -> list[Field]:
        """The bound Fields (sql() registers the tables among them)."""
        return list(self._fields.values())

    def __repr__(self) -> str:
        return "inputs(" + ", ".join(f"{n}: {f.info.kind}" for n, f in self._fields.items()) + ")"


class _LoopBridge:
    """Synchronous primitives that hand their work to the run's event loop and wait for it.

    The wait polls so an injected timeout or interrupt reaches a snippet blocked in a sub-call.
    """

    def __init__(self, host: SandboxHost) -> None:
        self.host = host

    def _wait(self, coro: Any) -> Any:
        future = asyncio.run_coroutine_threadsafe(coro, self.host.loop)
        try:
            while True:
                try:
                    return future.result(timeout=_POLL_S)
                except concurrent.futures.TimeoutError:
                    continue
        except BaseException:
            future.cancel()
            raise

    def llm_query(self, prompt: str, model: str | None = None, images: list[Image] | None = None) -> str:
        if images is None:
            return str(self._wait(self.host.llm_query(prompt, model)))
        return str(self._wait(self.host.llm_query(prompt, model, images=images)))

    def llm_query_batched(self, prompts: list[str], model: str | None = None,
                          images: list[list[Image]] | None = None) -> list[str]:
        if images is None:
            return list(self._wait(self.host.llm_query_batched(prompts, model)))
        return list(self._wait(self.host.llm_query_batched(prompts, model, images=images)))

    def rlm_query(self, prompt: str, inputs: dict[str, Any]) -> Any:
        return self._wait(self.host.rlm_query(prompt, inputs))

    def map_begin(self, info: dict[str, Any]) -> dict[str, Any]:
        return dict(self._wait(self.host.map_begin(info)))

    def map_batch(self, map_id: str, prompts: list[str], model: str | None = None,
                  images: list[list[Image]] | None = None) -> list[str]:
        if images is None:
            return list(self._wait(self.host.map_batch(map_id, prompts, model)))
        return list(self._wait(self.host.map_batch(map_id, prompts, model, images=images)))

    def map_end(self, map_id: str, figures: dict[str, Any]) -> None:
        self._wait(self.host.map_end(map_id, figures))

    def rlm_query_batched(self, prompts: list[str], inputs_list: list[dict[str, Any]] | None) -> list[Any]:
        return list(self._wait(self.host.rlm_query_batched(prompts, inputs_list)))


class LocalSandbox:
    """A namespace in this process. See the module docstring for what it does not protect against."""

    kind = "local"

    def __init__(self, *, max_output_chars: int = 10_000) -> None:
        self.max_output_chars = max_output_chars
        self._host: SandboxHost | None = None
        self._fields: list[Field] = []
        self._ns: dict[str, Any] = {}
        self._stray: list[threading.Thread] = []
        self._open = False

    # ---- lifecycle -------------------------------------------------------------------------------
    async def start(self, host: SandboxHost) -> None:
        """(Re)attach to a run's host; the namespace survives so a continued run sees its variables."""
        self._host = host
        if not self._open:
            _Capture.acquire()
            self._open = True
            self._fresh_namespace()
        else:
            install(self._ns, _LoopBridge(host), host.tools)

    def _fresh_namespace(self) -> None:
        assert self._host is not None
        self._ns = {"__name__": "__rlm__", "__builtins__": sandbox_builtins()}
        install(self._ns, _LoopBridge(self._host), self._host.tools)
        self._ns["inputs"] = LazyInputs(self._fields)

    async def bind(self, fields: Sequence[Field]) -> None:
        merged = {f.name: f for f in self._fields}
        merged.update({f.name: f for f in fields})
        self._fields = list(merged.values())
        self._ns["inputs"] = LazyInputs(self._fields)

    async def restart(self) -> None:
        self._fresh_namespace()

    async def close(self) -> None:
        if self._open:
            self._open = False
            _Capture.release()
        self._ns = {}

    def _protected(self) -> set[str]:
        """The names the model's code may not rebind: `inputs`, the primitives and the user's tools."""
        return set(RESERVED_NAMES) | set(self._host.tools if self._host else ())

    async def variables(self) -> list[str]:
        return [name for name, _ in user_variables(self._ns, self._protected())]

    @property
    def stray_threads(self) -> int:
        """Snippet threads that ignored a timeout and still run (a local sandbox cannot kill them)."""
        self._stray = [t for t in self._stray if t.is_alive()]
        return len(self._stray)

    # ---- running ---------------------------------------------------------------------------------
    async def execute(self, code: str, timeout: float, *, turn: int = 0) -> ExecResult:
        if not self._open or self._host is None:
            raise SandboxError("the local sandbox is not started")
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()
        sink: OutputSink | None = getattr(self._host, "output", None)
        streamed = StreamedOutput(self.max_output_chars) if sink is not None else None
        out = StreamingBuffer(self.max_output_chars, streamed, "stdout")
        err = StreamingBuffer(self.max_output_chars, streamed, "stderr")
        filename = snippet_filename(turn)
        tables: list[dict[str, Any]] = []

        def echo(value: Any) -> None:
            out.write(repr(value) + "\n")

        def work() -> None:
            _Capture.bind_thread(out, err)
            try:
                outcome = run_snippet(code, self._ns, filename, echo, tables, protected=self._protected())
            except BaseException as exc:  # an injected signal landing outside run_snippet
                outcome = None
                if not isinstance(exc, SnippetInterrupted):
                    err.write(f"{type(exc).__name__}: {exc}\n")
            finally:
                _Capture.bind_thread(None, None)
            if not loop.is_closed():
                loop.call_soon_threadsafe(settle, done, outcome)

        thread = threading.Thread(target=work, name=f"rlmnb-snippet-{turn}", daemon=True)
        started = time.perf_counter()
        thread.start()
        pump = loop.create_task(_stream(streamed, sink, turn)) if streamed is not None and sink is not None else None
        timed_out = False
        notice = None
        try:
            outcome = await asyncio.wait_for(asyncio.shield(done), timeout)
        except TimeoutError:
            timed_out = True
            outcome = await self._stop(thread, done)
            if outcome is not None:
                thread.join(0.5)  # it reported back; let it finish unwinding
            if thread.is_alive():
                self._stray.append(thread)
                notice = ("the snippet is blocked in a call that cannot be interrupted and keeps running in the "
                          "background; its variables may change later")
        except asyncio.CancelledError:
            if pump is not None:  # the turn is cut short: what it printed so far is all it will have
                pump.cancel()
                _send(streamed, sink, turn)
            if await self._stop(thread, done) is not None:
                thread.join(0.5)
            if thread.is_alive():
                self._stray.append(thread)
            raise
        finally:
            if pump is not None:
                pump.cancel()
            if streamed is not None:
                streamed.close()
        duration = time.perf_counter() - started
        if not timed_out:
            thread.join(1.0)  # it has reported back and is only unwinding: no snippet thread outlives its turn
        if outcome is None:
            return ExecResult(stdout=out.getvalue(), stderr=err.getvalue(), duration_s=duration,
                              timed_out=timed_out, notice=notice, tables=list(tables),
                              error=None if timed_out else "the snippet was stopped", error_type=None)
        submit = outcome.submit
        return ExecResult(
            stdout=out.getvalue(), stderr=err.getvalue(), error=outcome.error, error_type=outcome.error_type,
            submitted=submit is not None, answer=submit.value if submit else None,
            submit_error=submit.error if submit else None,
            submit_during_exception=submit.during_exception if submit else None,
            duration_s=duration, timed_out=timed_out or outcome.interrupted, notice=notice, tables=list(tables))

    async def _stop(self, thread: threading.Thread, done: asyncio.Future[Any]) -> Any:
        """Inject SnippetInterrupted into the worker thread and give it a grace period to unwind."""
        if thread.ident is not None and thread.is_alive():
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident),
                                                       ctypes.py_object(SnippetInterrupted))
        try:
            return await asyncio.wait_for(asyncio.shield(done), _GRACE_S)
        except TimeoutError:
            return None

    def __repr__(self) -> str:
        return f"LocalSandbox(open={self._open}, inputs={len(self._fields)})"


async def _stream(streamed: StreamedOutput, sink: OutputSink, turn: int) -> None:
    """Hand what the snippet prints to the host while it runs, at most every STREAM_INTERVAL_S (on the loop)."""
    while True:
        await asyncio.sleep(STREAM_INTERVAL_S)
        _send(streamed, sink, turn)


def _send(streamed: StreamedOutput | None, sink: OutputSink | None, turn: int) -> None:
    """Give the host what is pending now; a failing sink never disturbs the snippet."""
    if streamed is None or sink is None:
        return
    for stream, text in streamed.take():
        try:
            sink(text, stream, turn)
        except Exception:  # a view's trouble is not the model's
            return


__all__ = ["LazyInputs", "LocalSandbox", "StreamedOutput", "StreamingBuffer", "sandbox_builtins"]
