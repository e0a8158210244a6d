"""Reading the file system cheaply: the text-or-binary sniff, decoding, a bounded folder walk, links.

Entry points: `sniff(head, complete)` (why a file is binary, or None for UTF-8 text), `decode_file`,
`walk_folder` (files under a folder in name order, at most `limit`), `readable_root` (what a confined
kernel must be allowed to read for a lazy input's path), and `within` / `check_within` (a path's real
location is under its input's root).

Links: a folder or glob input is what lies under its root. A symbolic link in it that leads out of the
root (a file, a subfolder, or a folder on the way to a match) would hand a stranger's folder the power
to name any file of the user's, so binding refuses the input in one sentence naming the link
(`check_within`, `FolderWalk.links_out`), and the readers never follow one (`within`). A link that stays
under the root is an ordinary entry; the root itself may be a link (the user named it).
"""

from __future__ import annotations

import codecs
import itertools
import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from rlmnb._ground.errors import InputError

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


def within(root: str, path: str) -> bool:
    """Whether `path`, every link on the way resolved, is `root` (resolved) or under it."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def first_link_out(root: str, path: str) -> str | None:
    """The link that leads `path` (under `root` as written) out of `root`: the first part of the path after
    the root that is a symbolic link and resolves outside it; `path` itself when only the whole path
    does; None when `path` stays within `root`."""
    if within(root, path):
        return None
    base = os.path.abspath(root)
    rel = os.path.relpath(os.path.abspath(path), base)
    at = base
    for part in rel.split(os.sep):
        at = os.path.join(at, part)
        if os.path.islink(at) and not within(root, at):
            return at
    return os.path.abspath(path)


def link_out_error(name: str, root: str, link: str) -> InputError:
    """The one sentence that refuses an input holding `link`, which leads out of `root`."""
    where = os.path.abspath(root)
    if os.path.islink(link):
        return InputError(f"Input {name!r}: {link} is a symbolic link that leads outside {where}; remove the link "
                          "or copy what it points to into the folder, then bind it again.")
    return InputError(f"Input {name!r}: {link} lies outside {where}, the folder the pattern starts from; write the "
                      "pattern without '..' after a wildcard, or bind that file as an input of its own.")


def check_within(name: str, root: str, paths: Iterable[str]) -> None:
    """Refuse (InputError naming the link) when any of `paths` leads out of `root` through a link."""
    for path in paths:
        link = first_link_out(root, path)
        if link is not None:
            raise link_out_error(name, root, link)


@dataclass
class FolderWalk:
    """A folder's listing: files (relative posix path, size), folder count, whether it stopped at the
    limit, and the links met that lead out of the root (relative paths; never listed as files)."""

    files: list[tuple[str, int]]
    folders: int
    truncated: bool
    links_out: list[str] = field(default_factory=list)


def walk_folder(root: str, limit: int | None, with_sizes: bool) -> FolderWalk:
    """Files under root (relative posix paths), depth first in name order; symlinked folders are not
    entered, and a link (to a file or a folder) that leads out of the root is recorded in `links_out`
    instead of listed."""
    out = FolderWalk([], 0, False)
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
                if entry.is_symlink() and not within(root, entry.path):
                    out.links_out.append(rel)
                elif entry.is_dir(follow_symlinks=False):
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


__all__ = ["SNIFF_BYTES", "FolderWalk", "check_within", "decode_file", "decode_tail", "first_link_out", "link_out_error",
           "readable_root", "sniff", "walk_folder", "within"]
