"""The loopback broker: how `llm_query`, tools and `rlm_query` in a kernel sandbox reach the host.

Each call from the kernel opens one TCP connection to 127.0.0.1, sends the run's secret token
(`TOKEN_SIZE` bytes) and one length-prefixed JSON request, and reads one reply. The broker reads the
token first and compares it in constant time before it reads anything else: a connection from another
local process is closed after at most `TOKEN_SIZE` bytes were read by the broker (and at most
`STREAM_LIMIT`-sized buffers were filled by the event loop), so no one without the secret can make the
notebook allocate a large frame. Connections are never shared, so replies cannot cross between the
kernel's threads. Every request carries the run id, the turn and the step (one per executed snippet, unique within the sandbox); when a step times
out, its calls still in flight are cancelled and nothing is sent back for them, so a late answer can
never land in a later snippet.

The broker serves requests as tasks on the run's event loop and calls the run's `SandboxHost`, so the
budget, the trajectory and the widget see exactly what they see with the local sandbox.

The framing helpers at the top are standard library only: the kernel side imports them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import inspect
import json
import secrets
import socket
import struct
from collections.abc import Callable
from typing import Any

from rlmnb._ground.images import MAX_BYTES as MAX_IMAGE_BYTES
from rlmnb._ground.images import MAX_IMAGES, MAX_THUMB_BYTES, Image, from_wire
from rlmnb._sandbox.base import SandboxHost
from rlmnb._sandbox.transfer import decode_value, encode_value, read_image

HEADER = struct.Struct(">I")
MAX_FRAME = 256 << 20  # a request or reply larger than 256 MiB is refused (after the token was checked)
TOKEN_SIZE = 32  # the secret token that opens every connection: 32 hex characters (128 bits)
AUTH_TIMEOUT_S = 10.0  # a connection that has not sent its token by then is closed
STREAM_LIMIT = 64 << 10  # the event loop stops reading a connection whose unread buffer exceeds twice this
MIME = "application/x-rlmnb+json"  # the kernel side's replies, read from the execute reply's user expressions


class ProtocolError(Exception):
    """A frame that is malformed, too large, or cut short."""


# ---- framing (both sides) -----------------------------------------------------------------------------
def pack(obj: Any) -> bytes:
    data = json.dumps(obj, ensure_ascii=False, allow_nan=True).encode("utf-8", "surrogatepass")
    if len(data) > MAX_FRAME:
        raise ProtocolError(f"the call carries {len(data):,} bytes, more than the {MAX_FRAME:,} bytes one call may "
                            f"carry; send fewer or smaller prompts per call")
    return HEADER.pack(len(data)) + data


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


def recv_frame(sock: socket.socket) -> Any:
    """One frame from a blocking socket."""
    size = HEADER.unpack(_recv_exactly(sock, HEADER.size))[0]
    if size > MAX_FRAME:
        raise ProtocolError("frame too large")
    return unpack(_recv_exactly(sock, size))


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ProtocolError("the connection closed before the reply was complete")
        got += k
    return bytes(buf)


async def read_frame(reader: asyncio.StreamReader) -> Any:
    size = HEADER.unpack(await reader.readexactly(HEADER.size))[0]
    if size > MAX_FRAME:
        raise ProtocolError("frame too large")
    return unpack(await reader.readexactly(size))


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


# ---- the broker (host side) ---------------------------------------------------------------------------
class Broker:
    """Serves one sandbox's calls for the run currently attached (see `attach`)."""

    def __init__(self, transfer_dir: str, listener: socket.socket | None = None) -> None:
        self.transfer_dir = transfer_dir
        self.listener = listener  # given: every attach serves it (one port for the sandbox's life)
        self.host: SandboxHost | None = None
        self.run = ""
        self.secret = ""
        self.port = 0
        self.calls = 0
        self.refused = 0  # connections closed because their token was wrong or missing
        self._sock: socket.socket | None = None
        self._server: asyncio.AbstractServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._inflight: dict[int, set[asyncio.Task[Any]]] = {}
        self._dead_steps: set[int] = set()

    async def attach(self, host: SandboxHost) -> None:
        """Serve `host` on the running loop with a new secret and run id (and a new port, unless the
        broker was given a listener: a confined kernel may connect to that one port only)."""
        await self.close()
        self.host = host
        self.run = secrets.token_hex(8)
        self.secret = new_secret()
        self._dead_steps.clear()
        sock = self.listener.dup() if self.listener is not None else listening_socket()
        sock.setblocking(False)
        self._sock = sock
        self.port = sock.getsockname()[1]
        self._loop = asyncio.get_running_loop()
        self._server = await asyncio.start_server(self._serve, sock=sock, limit=STREAM_LIMIT)

    def settings(self) -> dict[str, Any]:
        """What the kernel side needs to call back (pushed to it on every attach)."""
        return {"port": self.port, "secret": self.secret, "run": self.run, "transfer_dir": self.transfer_dir}

    def drop_step(self, step: int) -> None:
        """The step timed out or its kernel was lost: cancel its calls; their replies are never sent."""
        self._dead_steps.add(step)
        for task in self._inflight.pop(step, set()):
            task.cancel()

    async def close(self) -> None:
        """Stop serving (the loop that served may already be closed: then only the socket is closed)."""
        for step in list(self._inflight):
            self.drop_step(step)
        server, self._server = self._server, None
        if server is not None and self._loop is not None and not self._loop.is_closed():
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is self._loop:
                server.close()
            else:
                self._loop.call_soon_threadsafe(server.close)
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
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        step = None
        try:
            try:
                token = await asyncio.wait_for(reader.readexactly(TOKEN_SIZE), AUTH_TIMEOUT_S)
            except (TimeoutError, asyncio.IncompleteReadError):
                token = b""
            if not hmac.compare_digest(token, self.secret.encode("ascii")):
                self.refused += 1
                return  # another process, or an old run's secret: closed before any frame is read
            req = await read_frame(reader)
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
                frame = pack(reply)
            except ProtocolError as exc:  # an answer too large to send: say so instead
                frame = pack({"ok": False, "error": error_record(exc), "id": req.get("id"), "run": self.run,
                              "turn": turn, "step": step})
            writer.write(frame)
            await writer.drain()
        except (ProtocolError, asyncio.IncompleteReadError, ConnectionError, ValueError, TypeError):
            pass
        finally:
            if step is not None and task is not None:
                self._inflight.get(step, set()).discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

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

    def _decode(self, data: Any) -> Any:
        return decode_value(data, self.transfer_dir, allow_pickle=False)

    def _images(self, files: Any) -> list[Image]:
        """Images the kernel wrote as files in the transfer directory, checked by their headers (never decoded)."""
        if not isinstance(files, list) or len(files) > MAX_IMAGES:
            raise TypeError(f"the images must be a list of at most {MAX_IMAGES} files")
        out = []
        for i, entry in enumerate(files):
            if not isinstance(entry, dict):
                raise TypeError("each image must be {'image': path, 'thumb': path or None}")
            thumb = read_image(entry["thumb"], self.transfer_dir, MAX_THUMB_BYTES) if entry.get("thumb") else b""
            out.append(from_wire(read_image(entry.get("image"), self.transfer_dir, MAX_IMAGE_BYTES), f"image {i}",
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


__all__ = ["MIME", "TOKEN_SIZE", "Broker", "ProtocolError", "error_record", "listening_socket", "new_secret",
           "opening", "pack", "read_frame", "recv_frame", "unpack"]
