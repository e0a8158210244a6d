"""What a Parquet dataset's footers say: exact rows, one schema for all files, column statistics.

Entry points: `parquet_meta(name, files, sizes)` for a dataset, `read_head(path)` for the head of one
footer (format version, schema, `num_rows`, Thrift compact protocol, without the row groups).

Invariants: rows and schemas come from the head of every file's footer, so the count is exact and the
schema checked over every file, whatever the bytes. Only beyond MAX_COUNT_FILES files, or beyond
MIN_COUNT_FILES when reading heads takes longer than COUNT_SECONDS (so the same dataset of up to
MIN_COUNT_FILES files gets the same exact answer on a busy machine), the count is scaled up from the
files read (a seeded sample, the first file always included) by their share of the bytes and marked as
an estimate; DuckDB checks the schemas of the files not read when a query reads them. Statistics need
the row groups, so whole footers are parsed for at most STATS_FILES files spread over the dataset and
STATS_FOOTER_BYTES of footers in all, and the summary says which part they cover. `read_head` raises
`FooterError` for anything it cannot read; callers fall back to pyarrow, whose message says why.
Numbers: docs/decisions/parquet-footer-heads.md.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from rlmnb._ground.errors import InputError
from rlmnb._ground.text import clip
from rlmnb.inputs._previews import human_count, one_line

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


MAX_COUNT_FILES = 2048           # files whose footer heads are read for the row count (beyond: estimated)
COUNT_SECONDS = 0.1              # ... or as many as can be read in this time, but at least:
MIN_COUNT_FILES = 1024           # files read however long they take: up to this many, the count is always exact
STATS_FILES = 32                 # files whose whole footers are parsed for statistics: first, last, between
STATS_FOOTER_BYTES = 256 << 10   # ... while their footers add up to at most this (the first is always read)
STATS_ROW_GROUPS = 32            # row groups whose statistics make the summary's min/max and null counts
STATS_COLUMNS = 12               # columns with statistics in the summary
STATS_CHARS = 600                # the statistics line of the summary
T = TypeVar("T")


def _footer(name: str, path: str) -> Any:
    import pyarrow.parquet as pq

    try:
        return pq.read_metadata(path)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError; truncation an OSError
        raise InputError(f"Input {name!r}: cannot read {os.path.basename(path)} as Parquet "
                         f"({clip(one_line(str(exc)), 200)}); fix or remove the file.") from None


def _head(name: str, path: str, like: FooterHead | None = None) -> FooterHead:
    """The head of a file's footer; from pyarrow's full parse when the fast reader cannot read it."""
    try:
        return read_head(path, like)
    except FooterError:
        meta = _footer(name, path)  # InputError saying what is wrong with the file, or what we could not read
        schema = meta.schema
        leaves = tuple((schema.column(i).path, str(schema.column(i).physical_type)) for i in range(len(schema)))
        # a schema key no other file has, so this file's schema is always compared in full
        return FooterHead(int(meta.num_rows), b"\0" + os.fsencode(path), leaves, int(meta.serialized_size))


def parquet_meta(name: str, files: Sequence[str], sizes: Sequence[int] | None = None
                 ) -> tuple[int, bool, str, str, list[tuple[str, str]]]:
    """(rows, estimated, how the rows are known, statistics line, [(column, physical type)]) of the files.

    `sizes` are the files' sizes in bytes (stat'ed again when not given); they scale an estimate.
    """
    order = _count_order(len(files))
    deadline = time.perf_counter() + COUNT_SECONDS
    heads = {0: _head(name, files[0])}
    same = {heads[0].schema}  # schema encodings seen to be equal to the first file's
    for i in order[1:]:
        if len(heads) >= MIN_COUNT_FILES and time.perf_counter() > deadline:
            break
        head = heads[i] = _head(name, files[i], heads[0])
        if head.schema not in same:
            _check_schema(name, files[0], files[i])
            same.add(head.schema)
    rows = sum(h.num_rows for h in heads.values())
    columns = list(heads[0].leaves)
    stats = _statistics(name, files, heads, columns)
    if len(heads) < len(files):
        size = (lambda i: sizes[i]) if sizes is not None else (lambda i: os.path.getsize(files[i]))
        seen = sum(size(i) for i in heads)
        total = sum(size(i) for i in range(len(files)))
        rows = round(rows * total / max(1, seen))
        return (rows, True, f"estimated from the footers of {len(heads):,} of the {len(files):,} files (scaled by "
                f"their share of the bytes)", stats, columns)
    return rows, False, "from Parquet metadata", stats, columns


def _count_order(n: int) -> list[int]:
    """File 0, then the others whose heads are read: all of them, or a seeded random sample of MAX_COUNT_FILES."""
    if n <= MAX_COUNT_FILES:
        rest = list(range(1, n))
        random.Random(n).shuffle(rest)  # a spread sample if the time budget stops the reading early
    else:
        rest = random.Random(n).sample(range(1, n), MAX_COUNT_FILES - 1)
    return [0, *rest]


def _check_schema(name: str, a_path: str, b_path: str) -> None:
    """Raise the schema clash between two files whose schema encodings differ, unless pyarrow finds them equal."""
    a, b = _footer(name, a_path).schema, _footer(name, b_path).schema
    if not a.equals(b):
        raise _clash(name, a_path, b_path, a, b)


def _clash(name: str, a_path: str, b_path: str, a: Any, b: Any) -> InputError:
    a_cols = {f.name: str(f.type) for f in a.to_arrow_schema()}
    b_cols = {f.name: str(f.type) for f in b.to_arrow_schema()}
    only = [c for c in a_cols if c not in b_cols] + [c for c in b_cols if c not in a_cols]
    if only:
        what = f"column {only[0]!r} is in only one of them"
    else:
        col = next((c for c in a_cols if a_cols[c] != b_cols[c]), None)
        what = (f"column {col!r} is {a_cols[col]} in one and {b_cols[col]} in the other" if col
                else "their column types or order differ")
    return InputError(f"Input {name!r}: {os.path.basename(a_path)} and {os.path.basename(b_path)} do not share a "
                      f"schema ({what}); bind them as separate inputs or make their columns agree.")


def _statistics(name: str, files: Sequence[str], heads: Mapping[int, FooterHead],
                columns: Sequence[tuple[str, str]]) -> str:
    """Min..max and null counts of the first columns, from row groups spread over a few files' footers."""
    footers: list[Any] = []
    budget = STATS_FOOTER_BYTES
    picks = spread(range(len(files)), STATS_FILES)
    for i in dict.fromkeys([picks[0], picks[-1], *picks[1:-1]]):  # first and last before the others
        size = (heads[i] if i in heads else _head(name, files[i])).footer_bytes
        if footers and size > budget:
            continue
        footers.append(_footer(name, files[i]))
        budget -= size
    groups = [(f, g) for f, meta in enumerate(footers) for g in range(meta.num_row_groups)]
    total = len(groups)
    if total > STATS_ROW_GROUPS:
        step = (total - 1) / (STATS_ROW_GROUPS - 1)
        groups = [groups[round(i * step)] for i in range(STATS_ROW_GROUPS)]
    shown = [(j, c) for j, (c, _) in enumerate(columns[:STATS_COLUMNS]) if "." not in c]
    acc: dict[int, list[Any]] = {j: [None, None, 0, True] for j, _ in shown}  # lo, hi, nulls, nulls complete
    for f, g in groups:
        rg = footers[f].row_group(g)
        for j, _ in shown:
            st = rg.column(j).statistics
            slot = acc[j]
            if st is None:
                slot[3] = False
                continue
            if st.has_min_max:
                try:
                    slot[0] = st.min if slot[0] is None else min(slot[0], st.min)
                    slot[1] = st.max if slot[1] is None else max(slot[1], st.max)
                except TypeError:
                    pass
            if st.has_null_count:
                slot[2] += int(st.null_count)
            else:
                slot[3] = False
    parts = []
    for j, col in shown:
        lo, hi, nulls, complete = acc[j]
        bits = []
        if lo is not None and hi is not None:
            bits.append(f"{clip(one_line(str(lo)), 24)}..{clip(one_line(str(hi)), 24)}")
        if complete and nulls:
            bits.append(f"{human_count(nulls)} nulls")
        if bits:
            parts.append(f"{clip(col, 24)} {' '.join(bits)}")
    if not parts:
        return ""
    if len(footers) < len(files):
        scope = (f" (from {len(groups):,} row group{'' if len(groups) == 1 else 's'} in {len(footers):,} of "
                 f"{len(files):,} files)")
    else:
        scope = f" (from {len(groups):,} of {total:,} row groups)" if len(groups) < total else ""
    return clip(f"statistics{scope}: " + "; ".join(parts), STATS_CHARS)


def spread(items: Sequence[T], k: int) -> list[T]:
    """k items spread evenly over `items`, first and last included."""
    if len(items) <= k:
        return list(items)
    step = (len(items) - 1) / (k - 1)
    return [items[round(i * step)] for i in range(k)]


__all__ = []
