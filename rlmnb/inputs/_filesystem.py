"""Reading the file system cheaply: the text-or-binary sniff, decoding, a bounded folder walk.

Entry points: `sniff(head, complete)` (why a file is binary, or None for UTF-8 text), `decode_file`,
`walk_folder` (files under a folder in name order, at most `limit`) and `readable_root` (what a confined
kernel must be allowed to read for a lazy input's path).
"""

from __future__ import annotations

import codecs
import itertools
import os
from dataclasses import dataclass

SNIFF_BYTES = 8192         # head of a file that decides text or binary
_WILDCARDS = "*?[{"

def readable_root(path: str) -> str | None:
    """What a confined kernel must be allowed to read for a lazy input that names `path`: an existing
    file or folder itself, or for a glob (`data/**/*.parquet`, `data/year=202?/x.csv`) the longest
    leading folder without a wildcard, which the reader lists (`data`, not its parent). None for a URL
    or a path that names nothing here."""
    if "://" in path:
        return None
    where = os.path.abspath(path)
    if any(c in where for c in _WILDCARDS):
        parts = where.split(os.sep)
        plain = list(itertools.takewhile(lambda part: not any(c in part for c in _WILDCARDS), parts))
        where = os.sep.join(plain) or os.sep
        return where if os.path.isdir(where) else None
    return where if os.path.exists(where) else None


def sniff(head: bytes, complete: bool) -> str | None:
    """Why the head of a file is binary, or None for UTF-8 text."""
    if b"\0" in head:
        return "NUL bytes in the first 8 KiB"
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=complete)
    except UnicodeDecodeError:
        return "not valid UTF-8 in the first 8 KiB"
    return None


def decode_tail(data: bytes) -> str:
    start = 0
    while start < min(3, len(data)) and 0x80 <= data[start] <= 0xBF:  # skip a cut multi-byte character
        start += 1
    return data[start:].decode("utf-8", "replace")


def decode_file(data: bytes) -> str | bytes:
    """File content as text when its first 8 KiB look like UTF-8 text, else the bytes."""
    head = data[:SNIFF_BYTES]
    if sniff(head, complete=len(data) <= SNIFF_BYTES) is not None:
        return data
    return data.decode("utf-8-sig", "replace")


@dataclass
class _Walk:
    files: list[tuple[str, int]]
    folders: int
    truncated: bool


def walk_folder(root: str, limit: int | None, with_sizes: bool) -> _Walk:
    """Files under root (relative posix paths), depth first in name order; symlinked folders are not entered."""
    out = _Walk([], 0, False)
    entries = 0
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            with os.scandir(os.path.join(root, rel_dir) if rel_dir else root) as it:
                room = None if limit is None else limit - entries + 1
                items = sorted(itertools.islice(it, room), key=lambda e: e.name)
        except OSError:
            continue
        subdirs = []
        for entry in items:
            if limit is not None and entries >= limit:
                out.truncated = True
                break
            entries += 1
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    out.folders += 1
                    subdirs.append(rel)
                elif entry.is_file():
                    out.files.append((rel, entry.stat().st_size if with_sizes else 0))
            except OSError:
                continue
        if out.truncated:
            break
        stack.extend(reversed(subdirs))
    return out


__all__ = ["SNIFF_BYTES", "decode_file", "decode_tail", "readable_root", "sniff", "walk_folder"]
