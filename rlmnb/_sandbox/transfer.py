"""Moving data between the host and a kernel sandbox as files, never as code.

Inputs go host -> kernel as one file each in a per-sandbox directory in `/dev/shm` (a temp dir where
there is none): DataFrames, Series and Arrow tables as Arrow IPC files the kernel memory-maps, numpy
arrays as `.npy` files it memory-maps read-only, text and bytes as raw files, and anything else as a
pickle (the host trusts what it wrote itself). Paths are not copied: the kernel opens them directly.
A source object shipped once is not shipped again by the same sandbox (`--continue`, re-runs).

Values of sub-calls (tool arguments, `rlm_query` inputs and answers) use `encode_value`, a tagged
JSON form whose large tables and arrays travel as files too. Kernel -> host decoding never unpickles:
the kernel runs code we did not read, so the host accepts only JSON, Arrow IPC and pickle-free `.npy`.
A value file is opened by its one name relative to the transfer directory's descriptor, without
following a link, and must be a plain file with one link: the kernel may write that directory, so
nothing is checked first and opened later (a link swapped in between could point anywhere).

This module is imported on both sides; it needs only the standard library until a table or an array
is actually moved.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import pickle
import re
import secrets
import shutil
import stat
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    from rlmnb.inputs import Field

_SHM = "/dev/shm"
_PREFIX = "rlmnb-"
_DIR_RE = re.compile(r"^rlmnb-(?:kernel-|cwd-|ipython-)?(\d+)-[0-9A-Za-z_]+$")
_swept = False
_sweep_lock = threading.Lock()


# ---- the per-sandbox directory ------------------------------------------------------------------
def transfer_root() -> str:
    """`/dev/shm` when it is a writable directory, else the system temp dir."""
    if os.path.isdir(_SHM) and os.access(_SHM, os.W_OK | os.X_OK):
        return _SHM
    return tempfile.gettempdir()


def private_temp_dir(kind: str) -> str:
    """A new temp dir `rlmnb-<kind>-<host pid>-<random>` that `sweep_stale` removes after a crash."""
    return tempfile.mkdtemp(prefix=f"{_PREFIX}{kind}-{os.getpid()}-")


def make_transfer_dir() -> str:
    """A new private directory `<root>/rlmnb-<host pid>-<random>` (mode 0700)."""
    sweep_stale()
    path = os.path.join(transfer_root(), f"{_PREFIX}{os.getpid()}-{secrets.token_hex(6)}")
    os.mkdir(path, 0o700)
    return path


def sweep_stale() -> None:
    """Remove transfer and kernel directories left by host processes that no longer exist (a crash)."""
    global _swept
    with _sweep_lock:
        if _swept:
            return
        _swept = True
    for root in {transfer_root(), tempfile.gettempdir()}:
        try:
            names = os.listdir(root)
        except OSError:
            continue
        for name in names:
            match = _DIR_RE.match(name)
            if match and not _pid_alive(int(match.group(1))):
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ---- inputs: host side ----------------------------------------------------------------------------
class Shipper:
    """Writes a sandbox's inputs into its transfer directory and remembers what it already wrote."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._shipped: dict[int, tuple[Any, dict[str, Any], tuple[Any, ...]]] = {}
        self._count = 0
        self.bytes_written = 0

    def spec(self, field: Field) -> dict[str, Any]:
        """How the kernel finds `field`: a JSON-able record naming the file (or path) and the format."""
        source = field.source
        info = field.info.to_dict()
        kind = field.info.kind
        from rlmnb.inputs._registry import crossing_spec

        reopen = crossing_spec(field)  # file-backed and lazy inputs: the kernel reopens them, nothing is copied
        if reopen is not None:
            return {**reopen, "name": field.name, "kind": kind, "info": info}
        stamp = _stamp(source)
        cached = self._shipped.get(id(source))
        if cached is not None and cached[0] is source and cached[2] == stamp:
            return {**cached[1], "name": field.name, "info": info}
        spec = self._write(field)
        spec.update(name=field.name, kind=kind, info=info)
        self._shipped[id(source)] = (source, spec, stamp)
        return spec

    def _path(self, suffix: str) -> str:
        self._count += 1
        return os.path.join(self.directory, f"in{self._count}{suffix}")

    def _write(self, field: Field) -> dict[str, Any]:
        source, kind = field.source, field.info.kind
        if kind == "text":
            path = self._path(".txt")
            self._dump_bytes(path, source.encode("utf-8", "surrogatepass"))
            return {"how": "text", "path": path}
        if kind == "bytes":
            path = self._path(".bin")
            self._dump_bytes(path, memoryview(source).cast("B"))
            return {"how": "bytes", "path": path, "view": not isinstance(source, bytes)}
        if kind in ("table", "series", "arrow", "polars_frame"):
            spec = self._write_arrow(source, kind)
            if spec is not None:
                return spec
        from rlmnb.inputs._registry import exporter

        export = exporter(kind)
        if export is not None:  # a lazy input that cannot be reopened: its result, once, as Arrow IPC
            path = self._path(".arrow")
            self.bytes_written += write_ipc(export(source), path)
            return {"how": "arrow", "path": path, "exported": True}
        if kind == "array" and getattr(source, "dtype", None) is not None and not source.dtype.hasobject:
            import numpy as np

            path = self._path(".npy")
            with new_file(path) as f:
                np.save(f, source, allow_pickle=False)
                self.bytes_written += f.tell()
            return {"how": "npy", "path": path}
        path = self._path(".pkl")
        with new_file(path) as f:
            pickle.dump(source, f, protocol=pickle.HIGHEST_PROTOCOL)
            self.bytes_written += f.tell()
        return {"how": "pickle", "path": path}

    def _dump_bytes(self, path: str, data: Any) -> None:
        with new_file(path) as f:
            f.write(data)
        self.bytes_written += len(data)

    def _write_arrow(self, source: Any, kind: str) -> dict[str, Any] | None:
        """An Arrow IPC file of a frame, series or table; None when Arrow cannot hold it faithfully."""
        path = self._path(".arrow")
        try:
            table, extra = to_arrow(source, kind)
            written = write_ipc(table, path)
        except Exception:  # mixed object columns, duplicate names...: the pickle fallback keeps them exact
            with contextlib.suppress(OSError):
                os.unlink(path)
            return None
        self.bytes_written += written
        return {"how": "arrow", "path": path, **extra}


def _stamp(source: Any) -> tuple[Any, ...]:
    """A cheap fingerprint that catches the common in-place changes of a re-bound mutable object."""
    shape = getattr(source, "shape", None)
    if shape is not None and not (isinstance(shape, tuple) and all(isinstance(n, int) for n in shape)):
        shape = None  # a lazy frame's shape (Dask) is no number and compares as an expression
    columns = getattr(source, "columns", None)
    if columns is not None:
        with contextlib.suppress(Exception):
            return (shape, tuple(map(str, columns)))
    if shape is not None:
        return (shape, str(getattr(source, "dtype", "")))
    if isinstance(source, list | dict | bytearray):
        return (len(source),)
    return ()


def to_arrow(source: Any, kind: str) -> tuple[Any, dict[str, Any]]:
    """(pyarrow Table, extra spec fields) for a DataFrame, Series, Table or RecordBatch."""
    import pyarrow as pa

    if kind == "polars_frame":  # Polars' own buffers; the kernel rebuilds the frame with pl.from_arrow
        return source.to_arrow(), {}
    if kind == "arrow":
        if isinstance(source, pa.RecordBatch):
            return pa.Table.from_batches([source]), {"record_batch": True}
        return source, {}
    if kind == "series":
        name = source.name
        if name is not None and not isinstance(name, str | int | float | bool):
            raise TypeError("series name is not plain data")
        return pa.Table.from_pandas(source.to_frame("__series__")), {"series_name": name}
    if source.columns.has_duplicates:
        raise ValueError("duplicate column names")
    return pa.Table.from_pandas(source), {}


def new_file(path: str) -> BinaryIO:
    """A new file at `path`, open for writing, never written through whatever stands at that name.

    Where the kernel can write the folder (the fallback's transfer folder), it could plant a link at a name the
    host is about to write (`in3.arrow`): the name is removed, not followed, and the file is created with
    O_EXCL | O_NOFOLLOW, so what the host writes lands in a file it made."""
    for _ in range(8):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            continue  # something was put there again between the two calls
        return os.fdopen(fd, "wb")
    raise FileExistsError(f"{path} kept being replaced while rlmnb created it")


def write_ipc(table: Any, path: str) -> int:
    """Write `table` as an Arrow IPC file at `path` (a new file, see new_file); the bytes written."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    with new_file(path) as f:
        # Arrow's own file writer, on the descriptor just made (the magic link names that file, not the path)
        with pa.OSFile(f"/proc/self/fd/{f.fileno()}", "wb") as sink, ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        return os.fstat(f.fileno()).st_size


# ---- inputs: kernel side --------------------------------------------------------------------------
def read_ipc(path: str) -> Any:
    """The Arrow table of an IPC file, memory-mapped (no copy until something writes)."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    return ipc.open_file(pa.memory_map(path, "r")).read_all()


def frame_from_arrow(table: Any) -> Any:
    """A DataFrame over the Arrow buffers; object columns come back as object, as they were."""
    df = table.to_pandas(split_blocks=True)
    meta = table.schema.pandas_metadata or {}
    objects = [c.get("name") for c in meta.get("columns", []) if c.get("numpy_type") == "object"
               and c.get("pandas_type") in ("unicode", "bytes", "mixed")]
    for name in objects:
        if name in df.columns and df[name].dtype != object:
            df[name] = df[name].astype(object)
    return df


def load_spec(spec: Mapping[str, Any]) -> Any:
    """The source object a spec describes, as the host held it (a path kind returns its path)."""
    how, path = spec["how"], spec["path"]
    if how == "path":
        return Path(path)
    if how == "text":
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "surrogatepass")
    if how == "bytes":
        with open(path, "rb") as f:
            data = f.read()
        return memoryview(data).toreadonly() if spec.get("view") else data
    if how == "arrow":
        table = read_ipc(path)
        if spec["kind"] == "arrow" or spec.get("exported"):
            return table.to_batches()[0] if spec.get("record_batch") and table.num_rows else table
        if spec["kind"] == "polars_frame":
            return table
        df = frame_from_arrow(table)
        if spec["kind"] == "series":
            return df["__series__"].rename(spec.get("series_name"))
        return df
    if how == "npy":
        import numpy as np

        mapped = np.load(path, mmap_mode="r", allow_pickle=False)
        view = np.asarray(mapped)
        view.flags.writeable = False
        return view
    if how == "pickle":
        with open(path, "rb") as f:
            try:
                return pickle.load(f)  # noqa: S301 - written by the host for this kernel
            except (AttributeError, ImportError) as exc:
                raise TypeError(
                    f"input {spec['name']!r} holds objects whose class the sandbox kernel cannot import ({exc}); "
                    f"pass plain data, or use sandbox='local'.") from None
    raise ValueError(f"unknown transfer format {how!r}")


# ---- values of sub-calls ------------------------------------------------------------------------------
_TAG = "$rlmnb"


def encode_value(value: Any, directory: str, *, allow_pickle: bool) -> Any:
    """A JSON-able form of `value`. Tables and arrays become files in `directory`.

    With `allow_pickle` (host -> kernel only) anything else is pickled; without it, values that are not
    plain data raise TypeError.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else {_TAG: "float",
                                                                                           "v": repr(value)}
    if isinstance(value, list):
        return [encode_value(v, directory, allow_pickle=allow_pickle) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value) and _TAG not in value:
        return {k: encode_value(v, directory, allow_pickle=allow_pickle) for k, v in value.items()}
    if isinstance(value, tuple):
        return {_TAG: "tuple", "v": [encode_value(v, directory, allow_pickle=allow_pickle) for v in value]}
    if isinstance(value, bytes | bytearray):
        return {_TAG: "bytes", "v": base64.b64encode(bytes(value)).decode("ascii")}
    module = type(value).__module__.split(".")[0]
    if module in ("pandas", "pyarrow") and type(value).__name__ in ("DataFrame", "Series", "Table", "RecordBatch"):
        kind = {"DataFrame": "table", "Series": "series"}.get(type(value).__name__, "arrow")
        with contextlib.suppress(Exception):
            table, extra = to_arrow(value, kind)
            path = os.path.join(directory, f"v{secrets.token_hex(8)}.arrow")
            write_ipc(table, path)
            return {_TAG: "arrow", "path": path, "kind": kind, **extra}
    if module == "numpy" and type(value).__name__ == "ndarray" and not value.dtype.hasobject:
        import numpy as np

        path = os.path.join(directory, f"v{secrets.token_hex(8)}.npy")
        with new_file(path) as f:
            np.save(f, value, allow_pickle=False)
        return {_TAG: "npy", "path": path}
    if allow_pickle:
        return {_TAG: "pickle", "v": base64.b64encode(pickle.dumps(value, protocol=5)).decode("ascii")}
    from rlmnb._ground.jsonable import NotJSONable, to_jsonable

    try:
        return encode_value(to_jsonable(value), directory, allow_pickle=False)
    except NotJSONable:
        raise TypeError(f"a {type(value).__name__} cannot be sent out of the sandbox kernel; pass plain data "
                        f"(str, numbers, lists, dicts), a DataFrame or a numpy array.") from None


def decode_value(data: Any, directory: str | int, *, allow_pickle: bool) -> Any:
    """The inverse of `encode_value`. Files it reads must lie in `directory`; they are deleted.

    Without `allow_pickle` (kernel -> host) the data is untrusted: only JSON, pickle-free `.npy` and
    fully validated Arrow IPC are accepted.
    """
    if isinstance(data, list):
        return [decode_value(v, directory, allow_pickle=allow_pickle) for v in data]
    if not isinstance(data, dict):
        return data
    tag = data.get(_TAG)
    if tag is None:
        return {k: decode_value(v, directory, allow_pickle=allow_pickle) for k, v in data.items()}
    if tag == "float":
        return float(data["v"])
    if tag == "tuple":
        return tuple(decode_value(v, directory, allow_pickle=allow_pickle) for v in data["v"])
    if tag == "bytes":
        return base64.b64decode(data["v"])
    if tag in ("arrow", "npy"):
        fd = _open_inside(str(data["path"]), directory)
        try:
            return _read_value_file(tag, fd, data, trusted=allow_pickle)
        finally:
            os.close(fd)
    if tag == "pickle" and allow_pickle:
        return pickle.loads(base64.b64decode(data["v"]))  # noqa: S301 - host -> kernel only
    raise ValueError(f"unexpected value tag {tag!r}")


_REFUSED = "a value file outside the sandbox's transfer directory, or not a plain file in it, was refused"


def _open_beneath(directory: str | int, name: str) -> int:
    """A read descriptor of the plain, singly linked file `name` directly in `directory` (a path the host
    made, or a directory descriptor it holds), never following a link; a ValueError otherwise.

    This is the one way the host opens anything in a folder the sandbox can write: relative to the
    folder's descriptor, with O_NOFOLLOW (and O_NONBLOCK: a FIFO never blocks the host), checked on the
    descriptor it opened, so nothing is checked first and opened later."""
    if name in ("", ".", "..") or "/" in name or "\0" in name:
        raise ValueError(_REFUSED)
    dir_fd = directory if isinstance(directory, int) else os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError:
            raise ValueError(_REFUSED) from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            os.close(fd)
            raise ValueError(_REFUSED)
        return fd
    finally:
        if not isinstance(directory, int):
            os.close(dir_fd)


def _open_inside(path: str, directory: str | int) -> int:
    """A read descriptor of the value file `path` names, unlinked from `directory` (a ValueError when
    it is not a plain, singly linked file directly in it).

    Only the last component of `path` is used (see _open_beneath), so a symlink, a swapped-in link or a
    hard link to a file elsewhere is refused, and what is read is what was opened. With a directory path,
    `path` must also name that directory; a directory descriptor (a namespaced sandbox's outbox, whose
    path differs inside and out) is its own proof."""
    name = os.path.basename(path)
    if not isinstance(directory, int) and (
            os.path.realpath(os.path.dirname(os.path.abspath(path))) != os.path.realpath(directory)):
        raise ValueError(_REFUSED)
    fd = _open_beneath(directory, name)
    dir_fd = directory if isinstance(directory, int) else os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dir_fd)  # the name only: the open descriptor stays readable
    finally:
        if not isinstance(directory, int):
            os.close(dir_fd)
    return fd


def read_beneath(directory: str | int, name: str, limit: int) -> bytes:
    """At most `limit` bytes of the plain file `name` in a folder the sandbox can write (b"" when it is not
    there or not a plain file): the host's one way to read such a file in place (see _open_beneath)."""
    try:
        fd = _open_beneath(directory, name)
    except (ValueError, OSError):
        return b""
    with os.fdopen(fd, "rb") as f:
        return f.read(limit)


def _read_value_file(tag: str, fd: int, data: Mapping[str, Any], *, trusted: bool) -> Any:
    if tag == "npy":
        import numpy as np

        with os.fdopen(os.dup(fd), "rb") as f:
            return np.load(f, allow_pickle=False)
    import mmap

    import pyarrow as pa
    import pyarrow.ipc as ipc

    size = os.fstat(fd).st_size
    if size == 0:
        raise ValueError("an empty value file was refused")
    mapped = mmap.mmap(fd, size, access=mmap.ACCESS_READ)  # stays mapped until the table is dropped
    table = ipc.open_file(pa.BufferReader(pa.py_buffer(mapped))).read_all()
    if not trusted:
        table.validate(full=True)
    if data["kind"] == "arrow":
        return table.to_batches()[0] if data.get("record_batch") and table.num_rows else table
    df = frame_from_arrow(table).copy()  # detached from the mapping
    return df["__series__"].rename(data.get("series_name")) if data["kind"] == "series" else df


def write_image(data: bytes, directory: str) -> str:
    """Image bytes as a file in the transfer directory (kernel -> host); its path."""
    path = os.path.join(directory, f"img{secrets.token_hex(8)}.bin")
    with new_file(path) as f:
        f.write(data)
    return path


def read_image(path: Any, directory: str | int, limit: int) -> bytes:
    """The bytes of an image file the kernel wrote (it must lie in `directory`, at most `limit` bytes); the file
    is deleted. The bytes are untrusted: the caller checks them (rlmnb._ground.images.from_wire)."""
    fd = _open_inside(str(path), directory)  # unlinked already; a link or a non-plain file is refused
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"an image of over {limit:,} bytes was refused")
    return data


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=True, allow_nan=True)


__all__ = ["Shipper", "decode_value", "encode_value", "load_spec", "make_transfer_dir", "new_file", "read_beneath",
           "read_image",
           "sweep_stale", "transfer_root", "write_image"]
