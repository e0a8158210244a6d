"""The broker: how `llm_query`, tools and `rlm_query` in a kernel sandbox reach the host.

Each call from the kernel opens one connection to the broker's socket (a Unix socket for a sandbox with no
network, else loopback TCP), sends the run's secret token (`TOKEN_SIZE` bytes) and one length-prefixed JSON
request, and reads one reply. Connections are never shared, so replies cannot cross between the kernel's
threads. Every request carries the run id, the turn and the step (one per executed snippet, unique within the
sandbox); when a step times out, its calls still in flight are cancelled and nothing is sent back for them, so
a late answer can never land in a later snippet.

What a connection can make the host do is bounded by construction (`Limits`), because model code is hostile:
- the broker reads exactly the bytes it asked for, never ahead: first the token, compared in constant time,
  so a connection without the secret is closed after `TOKEN_SIZE` bytes; then the 4-byte header, so a frame
  over `Limits.frame_bytes` is refused before one byte of its body is read;
- at most `Limits.connections` connections are served at once; further ones wait, unaccepted and unread;
- the bytes of requests held at once (read, decoded and being served) stay under `Limits.bytes_held`, and
  their JSON values under `Limits.items_held`: a connection takes its share before it reads or decodes;
- a body is counted (`json_items`: its structural characters outside strings, and its nesting) before it is
  decoded, so a frame of `[[],[],...]` or of 100,000 brackets is refused instead of decoded;
- the "output" op (a running snippet's printed output, streamed to the views) is taken only within
  `OutputAllowance`: a few pieces a second, each small, a bounded total per run; more is dropped, and the
  host hands a piece to its `output` sink without waiting on anything.
The kernel side checks the same bounds before it sends (`pack`), so a call too large is refused there, in one
line the model can act on (`too_large`). The same decoder (`bounded_loads`) reads the kernel's execute
replies on the host.

The broker serves requests as tasks on the run's event loop and calls the run's `SandboxHost`, so the
budget, the trajectory and the widget see exactly what they see with the local sandbox.

The framing helpers at the top are standard library only: the kernel side imports them.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import inspect
import itertools
import json
import os
import re
import secrets
import socket
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rlmnb._ground.images import MAX_BYTES as MAX_IMAGE_BYTES
from rlmnb._ground.images import MAX_IMAGES, MAX_THUMB_BYTES, Image, from_wire
from rlmnb._sandbox.base import SandboxHost
from rlmnb._sandbox.transfer import decode_value, encode_value, read_image

HEADER = struct.Struct(">I")
TOKEN_SIZE = 32  # the secret token that opens every connection: 32 hex characters (128 bits)
MIME = "application/x-rlmnb+json"  # the kernel side's replies, read from the execute reply's user expressions
# a request (kernel -> host): 64 MiB is 640 prompts of 100,000 characters in one llm_query_batched, or a
# 60 MB text cut into 60 chunks (the demo's 20 MB needle in 20 is one batch); a larger batch is refused before
# it is sent, with how many prompts per call would fit. Strings decode at about their size; what multiplies
# memory is many small values, which MAX_ITEMS bounds. Tables and arrays never count: they travel as files.
MAX_FRAME = 64 << 20
MAX_ITEMS = 500_000  # JSON values and containers in one request (a list of 500,000 prompts, or of numbers)
MAX_DEPTH = 128  # nesting of one request or reply (a submitted value may nest 50 levels: see to_jsonable)
MAX_REPLY_FRAME = 256 << 20  # a reply (host -> kernel): the host's own answers, read by the kernel
# the kernel side's JSON reply to a host call, read by the host from the execute reply (a snippet's outputs,
# its submitted value, its tables): the kernel side keeps it within these, the host refuses more
REPLY_BYTES = 16 << 20
REPLY_ITEMS = 500_000
MAX_CONNECTIONS = 64  # served at once (the default max_concurrency of sub-calls is 64 too)
BYTES_HELD = 256 << 20  # request bytes held at once across connections (four requests of the largest size)
ITEMS_HELD = 1_000_000  # JSON values held at once across connections (~100 MB of Python objects at worst)
OUTPUT_CHUNK_CHARS = 8_000  # one streamed piece of a snippet's output, at most (the kernel side sends 4,000)
OUTPUT_PER_S = 8.0  # streamed pieces taken per second, at most (the kernel side sends 4); the burst is as many
OUTPUT_CHARS = 2_000_000  # streamed characters one attached run takes in all; its results carry the rest
AUTH_TIMEOUT_S = 10.0  # a connection that has not sent its token by then is closed
READ_TIMEOUT_S = 60.0  # an authenticated connection that stalls mid-frame this long is closed
ACCEPT_RETRY_S = 0.05  # after a failed accept (no descriptors left), the wait before the next one


class ProtocolError(Exception):
    """A frame that is malformed, too large, or cut short."""


class TooLarge(ProtocolError):
    """JSON over a bound: `found` bytes, values or levels (`what`), more than `limit`."""

    def __init__(self, what: str, found: int, limit: int) -> None:
        self.what, self.found, self.limit = what, found, limit
        nouns = {"bytes": "bytes", "items": "JSON values", "depth": "levels of nesting"}
        super().__init__(f"{found:,} {nouns[what]}, more than the {limit:,} allowed")


@dataclass(frozen=True)
class Limits:
    """What one broker holds at once; see the module's docstring. A frame must fit the shared amounts."""

    frame_bytes: int = MAX_FRAME
    frame_items: int = MAX_ITEMS
    depth: int = MAX_DEPTH
    connections: int = MAX_CONNECTIONS
    bytes_held: int = BYTES_HELD
    items_held: int = ITEMS_HELD

    def __post_init__(self) -> None:
        if min(self.frame_bytes, self.frame_items, self.depth, self.connections) < 1:
            raise ValueError("every broker limit must be at least 1")
        if self.frame_bytes > self.bytes_held or self.frame_items > self.items_held:
            raise ValueError("one frame must fit the bytes and items the broker holds at once")


# ---- bounded JSON (both sides) ------------------------------------------------------------------------
# a JSON string, escapes included, or an unterminated one to the end (possessive: linear, never backtracks)
_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"?', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_SIGNS = bytes.maketrans(b"[]{}", b"\x01\xff\x01\xff")  # +1 opens, -1 (as a signed byte) closes


def json_items(data: bytes | bytearray, *, max_bytes: int, max_items: int, max_depth: int = MAX_DEPTH) -> int:
    """How many JSON values and containers `data` holds, measured without decoding it.

    Items are counted by their structural characters outside strings (`[`, `{`, `,`, `:`, plus the top
    value): an upper bound of the values and containers decoding would make. Cost: a few passes over the
    bytes; strings are stripped (a linear scan) only when a plain count of those characters is over a bound.

    Raises:
        TooLarge: more than `max_bytes` bytes, `max_items` items, or `max_depth` levels of nesting.
    """
    if len(data) > max_bytes:
        raise TooLarge("bytes", len(data), max_bytes)
    opens = data.count(b"[") + data.count(b"{")
    items = opens + data.count(b",") + data.count(b":") + 1
    if items <= max_items and opens <= max_depth:
        return items
    strings = (data.count(b'"') - data.count(b'\\"')) // 2  # at least this many strings, each a value
    if strings > max_items:
        raise TooLarge("items", strings, max_items)
    bare = _STRING.sub(b'""', data)  # what strings hold is not structure
    opens = bare.count(b"[") + bare.count(b"{")
    items = opens + bare.count(b",") + bare.count(b":") + 1
    if items > max_items:
        raise TooLarge("items", items, max_items)
    if opens > max_depth:
        signs = memoryview(bare.translate(_SIGNS, _NOT_BRACKETS)).cast("b")
        depth = max(itertools.accumulate(signs), default=0)
        if depth > max_depth:
            raise TooLarge("depth", depth, max_depth)
    return items


def _loads(data: bytes | bytearray) -> Any:
    """Decode UTF-8 JSON already measured by `json_items`; any failure is a ProtocolError."""
    try:
        return json.loads(data.decode("utf-8", "surrogatepass"))
    except RecursionError:
        raise ProtocolError("the JSON is nested too deeply") from None
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError included
        raise ProtocolError(f"not JSON: {exc}") from None


def bounded_loads(data: str | bytes | bytearray, *, max_bytes: int, max_items: int,
                  max_depth: int = MAX_DEPTH) -> Any:
    """`json.loads` whose cost is bounded before it starts: at most `max_bytes` bytes (UTF-8),
    `max_items` values and containers, and `max_depth` levels (see `json_items`).

    Raises:
        TooLarge: over a bound (nothing was decoded).
        ProtocolError: not UTF-8 JSON.
    """
    if isinstance(data, str):
        if len(data) > max_bytes:  # never fewer bytes than characters
            raise TooLarge("bytes", len(data), max_bytes)
        data = data.encode("utf-8", "surrogatepass")
    json_items(data, max_bytes=max_bytes, max_items=max_items, max_depth=max_depth)
    return _loads(data)


# ---- framing (both sides) -----------------------------------------------------------------------------
def pack(obj: Any, limit: int = MAX_FRAME, *, checked: bool = True) -> bytes:
    """`obj` as one frame. A request (`checked`) must be within the bounds the broker reads (MAX_FRAME,
    MAX_ITEMS, MAX_DEPTH), so a call too large is refused here, before anything is sent.

    Raises:
        TooLarge: the frame is over a bound.
    """
    data = json.dumps(obj, ensure_ascii=False, allow_nan=True).encode("utf-8", "surrogatepass")
    if checked:
        json_items(data, max_bytes=limit, max_items=MAX_ITEMS)
    elif len(data) > limit:
        raise TooLarge("bytes", len(data), limit)
    return HEADER.pack(len(data)) + data


def too_large(op: str, payload: Mapping[str, Any], exc: TooLarge) -> str:
    """The one line the model reads when its call was too large to send, with what to do instead."""
    prompts = payload.get("prompts")
    if exc.what == "depth":
        advice = "pass a value nested less deeply"
    elif isinstance(prompts, list) and len(prompts) > 1:
        fit = max(1, len(prompts) * exc.limit // max(exc.found, 1) * 9 // 10)
        advice = f"send the prompts in several calls of at most {fit:,} prompts each"
    elif op in ("tool", "rlm_query", "rlm_query_batched"):
        advice = ("pass smaller arguments: tables and arrays as DataFrames or numpy arrays (they travel as files), "
                  "or a file path")
    else:
        advice = "send a shorter prompt: split the text and ask about each part"
    return f"{op}() was not sent: it holds {exc}; {advice}."


def new_secret() -> str:
    """A fresh secret token (TOKEN_SIZE ASCII characters)."""
    return secrets.token_hex(TOKEN_SIZE // 2)


def opening(secret: str) -> bytes:
    """The bytes that open a connection to the broker: the secret token, before any frame."""
    token = secret.encode("ascii")
    if len(token) != TOKEN_SIZE:
        raise ProtocolError("the broker's secret has the wrong size")
    return token


def unpack(data: bytes) -> Any:
    return json.loads(data.decode("utf-8", "surrogatepass"))


def recv_frame(sock: socket.socket, limit: int = MAX_REPLY_FRAME) -> Any:
    """One frame from a blocking socket (the kernel side reads the host's replies with it)."""
    size = HEADER.unpack(_recv_exactly(sock, HEADER.size))[0]
    if size > limit:
        raise TooLarge("bytes", size, limit)
    return unpack(_recv_exactly(sock, size))


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        try:
            k = sock.recv_into(view[got:], n - got)
        except ConnectionResetError:  # the broker closed without reading all we sent (it refused the frame)
            k = 0
        if k == 0:
            raise ProtocolError("the connection closed before the reply was complete")
        got += k
    return bytes(buf)


def error_record(exc: BaseException) -> dict[str, Any]:
    """How an exception raised on the host is described to the kernel, which raises it again there."""
    record: dict[str, Any] = {"type": type(exc).__name__, "module": type(exc).__module__, "message": str(exc)}
    if all(isinstance(a, str | int | float | bool | type(None)) for a in exc.args):
        record["args"] = list(exc.args)
    return record


def listening_socket() -> socket.socket:
    """A TCP socket listening on a free loopback port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


def unix_listening_socket(path: str) -> socket.socket:
    """A Unix stream socket listening at `path` (mode 0600): the broker of a sandbox with no network, which
    sees only this socket file (bound into its mount namespace read-only; connecting needs no write).

    The mode is set between bind and listen, so no one can connect while it is wider; the caller removes
    the file (with its folder) when done.

    Raises:
        ValueError: `path` is longer than a Unix socket address holds (107 bytes on Linux).
    """
    if len(os.fsencode(path)) > 107:
        raise ValueError(f"the broker's socket path {path!r} is longer than the 107 bytes a Unix socket address "
                         f"holds; use a shorter temporary folder (TMPDIR)")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        os.chmod(path, 0o600)
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    return sock


def connect(settings: Mapping[str, Any]) -> socket.socket:
    """The kernel side's connection to its broker: the Unix socket when the settings name a path, else TCP."""
    if settings.get("path"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(settings["path"])
        except BaseException:
            sock.close()
            raise
        return sock
    sock = socket.create_connection(("127.0.0.1", settings["port"]))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class Allowance:
    """An amount (bytes, JSON values) that connections take before work and give back after it, so what
    they hold at once stays within `total`. Event-loop only; a waiter wakes when anything is given back."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.free = total
        self._given: asyncio.Event | None = None

    async def take(self, n: int) -> None:
        """Wait until `n` is free, then hold it (`n` must be at most `total`)."""
        if n > self.total:
            raise TooLarge("bytes", n, self.total)
        while n > self.free:
            if self._given is None:
                self._given = asyncio.Event()
            await self._given.wait()
        self.free -= n

    def give(self, n: int) -> None:
        self.free += n
        given, self._given = self._given, None
        if given is not None:
            given.set()


class OutputAllowance:
    """What the host takes of streamed output: pieces of at most `chunk` characters, `per_s` a second (a token
    bucket, with a burst of as many), and `total` characters in all. Event-loop only; never waits."""

    def __init__(self, *, chunk: int = OUTPUT_CHUNK_CHARS, per_s: float = OUTPUT_PER_S,
                 total: int = OUTPUT_CHARS, clock: Callable[[], float] | None = None) -> None:
        self.chunk, self.per_s, self.left = chunk, per_s, total
        self.clock = clock or time.monotonic
        self.tokens = per_s
        self.at = self.clock()
        self.dropped = 0

    def take(self, chars: int) -> bool:
        """True when a piece of `chars` characters may go to the views now (and count it), else False."""
        now = self.clock()
        self.tokens = min(self.per_s, self.tokens + (now - self.at) * self.per_s)
        self.at = now
        if chars > self.chunk or chars > self.left or self.tokens < 1:
            self.dropped += 1
            return False
        self.tokens -= 1
        self.left -= chars
        return True


class _Gate:
    """One attach's shares: connection slots, request bytes and JSON values held at once."""

    def __init__(self, limits: Limits) -> None:
        self.slots = asyncio.Semaphore(limits.connections)
        self.bytes = Allowance(limits.bytes_held)
        self.items = Allowance(limits.items_held)


# ---- the broker (host side) ---------------------------------------------------------------------------
class Broker:
    """Serves one sandbox's calls for the run currently attached (see `attach`), within `limits`."""

    def __init__(self, transfer_dir: str, listener: socket.socket | None = None, *,
                 limits: Limits | None = None) -> None:
        self.transfer_dir = transfer_dir  # where the host writes values for the kernel (it reads them there)
        # where the kernel writes values for the host: the transfer directory, or the directory descriptor of
        # a namespaced kernel's outbox (set by the sandbox once the kernel is up); read only via transfer.py
        self.outbox: str | int = transfer_dir
        self.listener = listener  # given: every attach serves it (one port or path for the sandbox's life)
        self.limits = limits or Limits()
        self.host: SandboxHost | None = None
        self.run = ""
        self.secret = ""
        self.port = 0
        self.path = ""  # the Unix socket's path when the listener is one
        self.calls = 0
        self.refused = 0  # connections closed because their token was wrong or missing
        self.refused_frames = 0  # authenticated frames refused unanswered: over a bound, or not JSON
        self.bytes_read = 0  # every byte the broker read from any connection
        self._sock: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._conns: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._inflight: dict[int, set[asyncio.Task[Any]]] = {}
        self._dead_steps: set[int] = set()
        self.output = OutputAllowance()

    async def attach(self, host: SandboxHost) -> None:
        """Serve `host` on the running loop with a new secret and run id (and a new port, unless the
        broker was given a listener: a confined kernel may connect to that one socket only)."""
        await self.close()
        self.host = host
        self.run = secrets.token_hex(8)
        self.secret = new_secret()
        self._dead_steps.clear()
        self.output = OutputAllowance()
        sock = self.listener.dup() if self.listener is not None else listening_socket()
        sock.setblocking(False)
        self._sock = sock
        name = sock.getsockname()
        self.port, self.path = (name[1], "") if isinstance(name, tuple) else (0, str(name))
        self._loop = asyncio.get_running_loop()
        self._accepting = self._loop.create_task(self._accept(sock, _Gate(self.limits)))

    def settings(self) -> dict[str, Any]:
        """What the kernel side needs to call back (pushed to it on every attach): the socket's "path" for a
        Unix socket, else its TCP "port"."""
        where: dict[str, Any] = {"path": self.path} if self.path else {"port": self.port}
        return {**where, "secret": self.secret, "run": self.run, "transfer_dir": self.transfer_dir}

    def drop_step(self, step: int) -> None:
        """The step timed out or its kernel was lost: cancel its calls; their replies are never sent."""
        self._dead_steps.add(step)
        for task in self._inflight.pop(step, set()):
            task.cancel()

    async def close(self) -> None:
        """Stop serving and end every connection (the loop that served may already be closed: then only the
        sockets are closed)."""
        for step in list(self._inflight):
            self.drop_step(step)
        tasks = [t for t in (self._accepting, *self._conns) if t is not None]
        self._accepting = None
        loop = self._loop
        if tasks and loop is not None and not loop.is_closed():
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            for task in tasks:
                if running is loop:
                    task.cancel()
                else:
                    loop.call_soon_threadsafe(task.cancel)
        self.close_now()

    def close_now(self) -> None:
        """Stop accepting connections at once (any thread; at interpreter exit)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._loop = None

    def release(self) -> None:
        """Close the listener for good (the sandbox is closing)."""
        self.close_now()
        if self.listener is not None:
            self.listener.close()

    # ---- serving --------------------------------------------------------------------------------------
    async def _accept(self, sock: socket.socket, gate: _Gate) -> None:
        """Accept a connection only while a slot is free: the others wait in the listen queue, unread."""
        loop = asyncio.get_running_loop()
        while True:
            await gate.slots.acquire()
            try:
                conn, _ = await loop.sock_accept(sock)
            except OSError:
                gate.slots.release()
                if self._sock is not sock:
                    return  # closed
                await asyncio.sleep(ACCEPT_RETRY_S)  # out of descriptors: let connections end first
                continue
            except BaseException:
                gate.slots.release()
                raise
            conn.setblocking(False)
            task = loop.create_task(self._serve(conn, gate))
            self._conns.add(task)
            task.add_done_callback(functools.partial(self._ended, conn=conn, gate=gate))

    def _ended(self, task: asyncio.Task[None], *, conn: socket.socket, gate: _Gate) -> None:
        """A connection's task ended, even one cancelled before it ran: its slot back, its socket closed."""
        self._conns.discard(task)
        gate.slots.release()
        conn.close()

    async def _recv(self, conn: socket.socket, n: int, timeout: float) -> bytearray | None:
        """Exactly `n` bytes, reading none past them; None when the peer closed first or the time ran out."""
        loop = asyncio.get_running_loop()
        buf = bytearray(n)
        got = 0
        with memoryview(buf) as view:
            try:
                async with asyncio.timeout(timeout):
                    while got < n:
                        k = await loop.sock_recv_into(conn, view[got:])
                        if k == 0:
                            return None
                        got += k
                        self.bytes_read += k
            except (TimeoutError, ConnectionError):
                return None
        return buf

    async def _serve(self, conn: socket.socket, gate: _Gate) -> None:
        task = asyncio.current_task()
        step = None
        held_bytes = held_items = 0
        limits = self.limits
        try:
            token = await self._recv(conn, TOKEN_SIZE, AUTH_TIMEOUT_S)
            if token is None or not hmac.compare_digest(bytes(token), self.secret.encode("ascii")):
                self.refused += 1
                return  # another process, or an old run's secret: closed before any frame is read
            header = await self._recv(conn, HEADER.size, READ_TIMEOUT_S)
            if header is None:
                return
            size = HEADER.unpack(header)[0]
            if size > limits.frame_bytes:
                self.refused_frames += 1
                return  # refused from its header: not one byte of the body is read
            await gate.bytes.take(size)
            held_bytes = size
            data = await self._recv(conn, size, READ_TIMEOUT_S)
            if data is None:
                return
            try:
                items = json_items(data, max_bytes=limits.frame_bytes, max_items=limits.frame_items,
                                   max_depth=limits.depth)
                await gate.items.take(items)
                held_items = items
                req = _loads(data)
            except ProtocolError:
                self.refused_frames += 1
                return
            del data
            if not isinstance(req, dict) or req.get("run") != self.run:
                return  # not ours (an old run): no answer at all
            step, turn = req.get("step"), req.get("turn")
            if not isinstance(step, int) or step in self._dead_steps:
                return
            assert task is not None
            self._inflight.setdefault(step, set()).add(task)
            self.calls += 1
            try:
                reply = {"ok": True, "value": await self._dispatch(req)}
            except asyncio.CancelledError:
                return  # the step was dropped: the kernel has given up on this call
            except Exception as exc:
                reply = {"ok": False, "error": error_record(exc)}
            if step in self._dead_steps:
                return
            reply.update(id=req.get("id"), run=self.run, turn=turn, step=step)
            try:
                frame = pack(reply, MAX_REPLY_FRAME, checked=False)
            except (TooLarge, ValueError, TypeError, RecursionError) as exc:  # an answer that cannot be sent
                frame = pack({"ok": False, "error": error_record(exc), "id": req.get("id"), "run": self.run,
                              "turn": turn, "step": step}, MAX_REPLY_FRAME, checked=False)
            await asyncio.get_running_loop().sock_sendall(conn, frame)
        except (OSError, ValueError, TypeError):
            pass  # the kernel hung up, or sent a request of the wrong shape: no answer
        finally:
            if step is not None and task is not None:
                self._inflight.get(step, set()).discard(task)
            if held_bytes:
                gate.bytes.give(held_bytes)
            if held_items:
                gate.items.give(held_items)

    async def _dispatch(self, req: dict[str, Any]) -> Any:
        host = self.host
        assert host is not None
        op = req.get("op")
        model = req.get("model")
        if model is not None and not isinstance(model, str):
            raise TypeError("model must be a str or None")
        if op == "llm_query":
            if req.get("images") is None:
                return await host.llm_query(_str(req.get("prompt")), model)
            images = self._images(req["images"])
            return await host.llm_query(_str(req.get("prompt")), model, images=images)
        if op == "llm_query_batched":
            if req.get("images") is None:
                return list(await host.llm_query_batched(_strs(req.get("prompts")), model))
            batches = self._image_lists(req["images"])
            return list(await host.llm_query_batched(_strs(req.get("prompts")), model, images=batches))
        if op in ("map_begin", "map_batch", "map_end"):
            if op == "map_batch" and req.get("images") is not None:
                return list(await host.map_batch(_str(req.get("map_id")), _strs(req.get("prompts")), model,
                                                 images=self._image_lists(req["images"])))
            return await _map_op(host, op, req)
        if op == "rlm_query":
            inputs = self._decode(req.get("inputs") or {})
            if not isinstance(inputs, dict):
                raise TypeError("rlm_query inputs must be a mapping")
            return self._encode(await host.rlm_query(_str(req.get("prompt")), inputs))
        if op == "rlm_query_batched":
            inputs_list = self._decode(req.get("inputs_list"))
            return self._encode(list(await host.rlm_query_batched(_strs(req.get("prompts")), inputs_list)))
        if op == "output":
            return self._output(req)
        if op == "tool":
            name = req.get("name")
            fn: Callable[..., Any] | None = host.tools.get(name) if isinstance(name, str) else None
            if fn is None:
                raise NameError(f"no tool named {name!r}")
            args = self._decode(req.get("args") or [])
            kwargs = self._decode(req.get("kwargs") or {})
            if not isinstance(args, list) or not isinstance(kwargs, dict):
                raise TypeError("bad tool arguments")
            if inspect.iscoroutinefunction(fn):
                result = await fn(*args, **kwargs)
            else:
                result = await asyncio.to_thread(fn, *args, **kwargs)
                if inspect.isawaitable(result):
                    result = await result
            return self._encode(result)
        raise ValueError(f"unknown operation {op!r}")

    def _output(self, req: dict[str, Any]) -> bool:
        """A piece of the running snippet's output, to the host's `output` sink when the allowance takes it
        (True) and the host has one; dropped otherwise (False). Never waits: the sink only records it."""
        text, stream, turn = req.get("text"), req.get("stream"), req.get("turn")
        if not isinstance(text, str) or stream not in ("stdout", "stderr") or not isinstance(turn, int):
            raise TypeError("output takes text (a str), stream ('stdout' or 'stderr') and the turn (an int)")
        sink: Callable[[str, str, int], None] | None = getattr(self.host, "output", None)
        if sink is None or not self.output.take(len(text)):
            return False
        sink(text, stream, turn)
        return True

    def _decode(self, data: Any) -> Any:
        return decode_value(data, self.outbox, allow_pickle=False)

    def _images(self, files: Any) -> list[Image]:
        """Images the kernel wrote as files in the transfer directory, checked by their headers (never decoded)."""
        if not isinstance(files, list) or len(files) > MAX_IMAGES:
            raise TypeError(f"the images must be a list of at most {MAX_IMAGES} files")
        out = []
        for i, entry in enumerate(files):
            if not isinstance(entry, dict):
                raise TypeError("each image must be {'image': path, 'thumb': path or None}")
            thumb = read_image(entry["thumb"], self.outbox, MAX_THUMB_BYTES) if entry.get("thumb") else b""
            out.append(from_wire(read_image(entry.get("image"), self.outbox, MAX_IMAGE_BYTES), f"image {i}",
                                 thumb))
        return out

    def _image_lists(self, per: Any) -> list[list[Image]]:
        if not isinstance(per, list):
            raise TypeError("the images must be a list of lists of files")
        return [self._images(files) for files in per]

    def _encode(self, value: Any) -> Any:
        return encode_value(value, self.transfer_dir, allow_pickle=True)

    def __repr__(self) -> str:
        return f"Broker(port={self.port}, calls={self.calls})"


async def _map_op(host: Any, op: str, req: dict[str, Any]) -> Any:
    """llm_map's calls: open a map group, send one batch of packed prompts in it, close it with its figures."""
    if op == "map_begin":
        info = req.get("info")
        return await host.map_begin(info if isinstance(info, dict) else {})
    map_id = _str(req.get("map_id"))
    if op == "map_batch":
        model = req.get("model")
        return list(await host.map_batch(map_id, _strs(req.get("prompts")), model if isinstance(model, str) else None))
    figures = req.get("figures")
    await host.map_end(map_id, figures if isinstance(figures, dict) else {})
    return None


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("the prompt must be a str")
    return value


def _strs(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError("the prompts must be a list of str")
    return value


__all__ = ["MAX_DEPTH", "MAX_FRAME", "MAX_ITEMS", "MIME", "REPLY_BYTES", "REPLY_ITEMS", "TOKEN_SIZE", "Allowance", "Broker", "Limits",
           "OutputAllowance",
           "ProtocolError", "TooLarge", "bounded_loads", "connect", "error_record", "json_items", "listening_socket",
           "new_secret", "opening", "pack", "recv_frame", "too_large", "unix_listening_socket", "unpack"]
