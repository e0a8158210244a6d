"""The head of a Parquet footer: row count and schema, read without parsing the row groups.

A Parquet footer is a Thrift (compact protocol) `FileMetaData` whose first fields are the format
version, the schema and `num_rows`; the row-group list after them is what makes a footer large
(~100 KB for a 25 M-row file) and slow to parse whole (~2 ms with pyarrow, holding the GIL). A
dataset's exact row count and its one-schema check need only the head, which takes tens of
microseconds to read here, so they can cover every file at any size. `read_head` raises
`FooterError` for anything it cannot read; callers fall back to pyarrow, whose message says why.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

HEAD_BYTES = 16 << 10   # bytes of a footer read first: schemas of a few hundred columns fit
TAIL_BYTES = 16 << 10   # bytes read at the end of a file: the footer itself when it is this small
_MAGIC = b"PAR1"
_PHYSICAL = ("BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY")
# Thrift compact type ids
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(13)


class FooterError(Exception):
    """The file's end is not a plain Parquet footer (truncated, encrypted, not Parquet, unreadable)."""


@dataclass(frozen=True)
class FooterHead:
    """What the first fields of one file's footer say.

    `schema` is the Thrift encoding of the schema list: two files whose `schema` bytes are equal
    have equal schemas (unequal bytes may still be equal schemas, written by different writers).
    """

    num_rows: int
    schema: bytes
    leaves: tuple[tuple[str, str], ...]  # (dotted column path, physical type) of each leaf column
    footer_bytes: int                    # the whole footer's length, i.e. what a full parse would read

    def to_dict(self) -> dict[str, object]:
        return {"num_rows": self.num_rows, "schema": self.schema.hex(), "leaves": [list(x) for x in self.leaves],
                "footer_bytes": self.footer_bytes}

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> FooterHead:
        leaves = d["leaves"]
        assert isinstance(leaves, list)
        return cls(int(str(d["num_rows"])), bytes.fromhex(str(d["schema"])),
                   tuple((str(p), str(t)) for p, t in leaves), int(str(d["footer_bytes"])))


def read_head(path: str, like: FooterHead | None = None) -> FooterHead:
    """The row count and schema of one Parquet file, from the head of its footer (one or two reads).

    `like`: another file's head, probably with the same schema; when the schema bytes are the same,
    its parsed columns are reused instead of parsing them again (most of the cost for small files).
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise FooterError(str(exc)) from None
    try:
        size = os.fstat(fd).st_size
        if size < 12:
            raise FooterError("too small for Parquet")
        tail_at = max(0, size - TAIL_BYTES)
        tail = os.pread(fd, size - tail_at, tail_at)
        if len(tail) != size - tail_at or tail[-4:] != _MAGIC:
            raise FooterError("no Parquet footer at the end of the file")
        length = int.from_bytes(tail[-8:-4], "little")
        start = size - 8 - length
        if start < 4:
            raise FooterError("footer length larger than the file")
        if start >= tail_at:
            return _parse(tail[start - tail_at:-8], length, like)
        head = os.pread(fd, min(length, HEAD_BYTES), start)
        try:
            return _parse(head, length, like)
        except IndexError:  # a schema longer than HEAD_BYTES, or fields out of the usual order
            return _parse(os.pread(fd, length, start), length, like)
    except OSError as exc:
        raise FooterError(str(exc)) from None
    finally:
        os.close(fd)


def _parse(buf: bytes, length: int, like: FooterHead | None = None) -> FooterHead:
    """FileMetaData fields 1-3. IndexError: `buf` ends first (when it is the whole footer: FooterError)."""
    r = _Reader(buf)
    schema: bytes | None = None
    leaves: tuple[tuple[str, str], ...] = ()
    rows: int | None = None
    try:
        fid = 0
        while rows is None or schema is None:
            fid, kind = r.field(fid)
            if kind == _STOP:
                raise FooterError("footer without a schema or a row count")
            if fid == 2 and kind == _LIST and like is not None and buf.startswith(like.schema, r.pos):
                r.pos += len(like.schema)  # the same encoding parses to the same columns
                schema, leaves = like.schema, like.leaves
            elif fid == 2 and kind == _LIST:
                begin = r.pos
                leaves = _leaves(r)
                schema = buf[begin:r.pos]
            elif fid == 3 and kind == _I64:
                rows = r.zigzag()
            else:
                r.skip(kind)
    except IndexError:
        if len(buf) >= length:
            raise FooterError("footer ends early") from None
        raise
    except (ValueError, RecursionError) as exc:
        raise FooterError(f"malformed footer ({exc})") from None
    return FooterHead(rows, schema, leaves, length)


def _leaves(r: _Reader) -> tuple[tuple[str, str], ...]:
    """The leaf columns of a flattened SchemaElement list (depth first; the first element is the root)."""
    elements: list[tuple[str, int | None, int]] = []  # name, physical type, number of children
    for _ in range(r.list_size(_STRUCT)):
        name, ptype, children, fid = "", None, 0, 0
        while True:
            fid, kind = r.field(fid)
            if kind == _STOP:
                break
            if fid == 1 and kind == _I32:
                ptype = r.zigzag()
            elif fid == 4 and kind == _BINARY:
                name = r.binary().decode("utf-8", "replace")
            elif fid == 5 and kind == _I32:
                children = r.zigzag()
            else:
                r.skip(kind)
        elements.append((name, ptype, children))
    out: list[tuple[str, str]] = []
    groups: list[str] = []  # the open groups below the root, outermost first
    left: list[int] = []    # children still to come in each of them
    for name, ptype, children in elements[1:]:
        if children > 0:
            groups.append(name)
            left.append(children)
            continue
        path = ".".join([*groups, name])
        out.append((path, _PHYSICAL[ptype] if ptype is not None and 0 <= ptype < len(_PHYSICAL) else "UNKNOWN"))
        while left:
            left[-1] -= 1
            if left[-1] > 0:
                break
            groups.pop()
            left.pop()
    return tuple(out)


class _Reader:
    """A cursor over Thrift compact-protocol bytes; reading past the end raises IndexError."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf, self.pos = buf, 0

    def byte(self) -> int:
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result
            shift += 7
            if shift > 70:
                raise ValueError("varint too long")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def binary(self) -> bytes:
        n = self.varint()
        if self.pos + n > len(self.buf):
            raise IndexError("binary past the end")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def field(self, last: int) -> tuple[int, int]:
        """(field id, type) of the next field of a struct; type _STOP at its end."""
        b = self.byte()
        kind = b & 0x0F
        if kind == _STOP:
            return 0, _STOP
        delta = b >> 4
        return (last + delta if delta else self.zigzag()), kind

    def list_size(self, expect: int | None = None) -> int:
        b = self.byte()
        size = b >> 4
        if size == 15:
            size = self.varint()
        if expect is not None and (b & 0x0F) != expect:
            raise ValueError("unexpected list element type")
        return size

    def skip(self, kind: int, depth: int = 0) -> None:
        if depth > 32:
            raise ValueError("nesting too deep")
        if kind in (_TRUE, _FALSE):
            return
        if kind == _BYTE:
            self.pos += 1
        elif kind in (_I16, _I32, _I64):
            self.varint()
        elif kind == _DOUBLE:
            self.pos += 8
        elif kind == _BINARY:
            self.binary()
        elif kind in (_LIST, _SET):
            b = self.byte()
            size = b >> 4 if b >> 4 != 15 else self.varint()
            elem = b & 0x0F
            for _ in range(size):
                if elem in (_TRUE, _FALSE):
                    self.pos += 1  # booleans in a container are one byte each
                else:
                    self.skip(elem, depth + 1)
        elif kind == _MAP:
            size = self.varint()
            if size:
                kv = self.byte()
                for _ in range(size):
                    for t in (kv >> 4, kv & 0x0F):
                        if t in (_TRUE, _FALSE):
                            self.pos += 1
                        else:
                            self.skip(t, depth + 1)
        elif kind == _STRUCT:
            fid = 0
            while True:
                fid, inner = self.field(fid)
                if inner == _STOP:
                    return
                self.skip(inner, depth + 1)
        else:
            raise ValueError(f"unknown Thrift type {kind}")
        if self.pos > len(self.buf):
            raise IndexError("past the end")
