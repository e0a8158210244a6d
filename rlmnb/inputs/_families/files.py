"""The files and folders family: a `pathlib.Path` to a file or a directory, a `DirectoryView`, a glob."""

from __future__ import annotations

import glob
import os
import posixpath
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlmnb._ground.errors import InputError
from rlmnb._ground.text import clip
from rlmnb._ground.tokens import CHARS_PER_TOKEN
from rlmnb.inputs._families import documents, image_folders
from rlmnb.inputs._families.text import sampled_tokens, text_preview
from rlmnb.inputs._filesystem import (
    SNIFF_BYTES,
    FolderWalk,
    check_within,
    decode_file,
    decode_tail,
    link_out_error,
    sniff,
    walk_folder,
    within,
)
from rlmnb.inputs._previews import one_line
from rlmnb.inputs._readonly import DirectoryView
from rlmnb.inputs._records import Field, FieldInfo
from rlmnb.inputs._registry import Family
from rlmnb.inputs._tables import duck, filetables
from rlmnb.inputs._tables.filetables import TableFiles, describe_table, open_relation

if TYPE_CHECKING:
    from rlmnb._ground.config import RLMConfig

MAX_DIR_ENTRIES = 10_000   # entries a directory description looks at
DIR_PREVIEW_FILES = 5      # file names shown for a directory

# --- paths -------------------------------------------------------------------------------------


def _describe_path(name: str, path: Path, config: RLMConfig, source: Any) -> Field:
    where = os.path.abspath(os.path.expanduser(path))
    try:
        st = os.stat(where)
    except FileNotFoundError:
        raise InputError(f"Input {name!r}: no file or directory at {where}; check the path.") from None
    except OSError as e:
        raise InputError(f"Input {name!r}: cannot read {where} ({e.strerror}).") from None
    import stat as stat_

    try:
        if stat_.S_ISDIR(st.st_mode):
            return _describe_directory(name, where, config, source)
        if stat_.S_ISREG(st.st_mode):
            table = filetables.for_file(name, where)
            if table is not None:
                return describe_table(name, table, config, source)
            document = documents.for_file(name, where, st.st_size, source)
            if document is not None:
                return document
            return _describe_file(name, where, st.st_size, config, source)
    except OSError as e:
        raise InputError(f"Input {name!r}: cannot read {where} ({e.strerror or e}).") from None
    raise InputError(f"Input {name!r}: {where} is neither a regular file nor a directory; pass a file or "
                     "a directory.")



def _describe_file(name: str, where: str, size: int, config: RLMConfig, source: Any) -> Field:
    pc = config.preview_chars
    with open(where, "rb") as f:
        def read(off: int, n: int) -> bytes:
            f.seek(off)
            return f.read(n)

        head = read(0, SNIFF_BYTES)
        binary_reason = sniff(head, complete=size <= SNIFF_BYTES)
        if binary_reason is None:
            tokens = sampled_tokens(read, size)
            if pc <= 0:
                preview, truncated = "", size > 0
            elif size <= 8 * pc:  # small: at most 2 * pc characters guaranteed only below this
                preview, truncated = text_preview(read(0, size).decode("utf-8-sig", "replace"), pc)
            else:
                head_text = read(0, 4 * pc).decode("utf-8-sig", "ignore")[:pc]
                tail_text = decode_tail(read(size - 4 * pc, 4 * pc))[-pc:]
                preview, truncated = repr(head_text) + "\n" + repr(tail_text), True
        else:
            tokens = round(size / CHARS_PER_TOKEN)
            if pc <= 0:
                preview, truncated = "", size > 0
            elif size <= 2 * pc:
                preview, truncated = clip(repr(read(0, size)), 2 * pc + 3), False
            else:
                preview = (clip(repr(read(0, pc)), pc + 3) + "\n"
                           + clip(repr(read(size - pc, pc)), pc + 3, keep="tail"))
                truncated = True
    if binary_reason is None:
        info = FieldInfo(name, "text_file", "str", size_bytes=size, est_tokens=tokens, preview=preview,
                         truncated=truncated, path=where)
        return Field(name, source, info, lambda: _read_text_file(name, where), read_paths=(where,))
    info = FieldInfo(name, "binary_file", "bytes", size_bytes=size, est_tokens=tokens, preview=preview,
                     truncated=truncated, path=where, detail=f"binary: {binary_reason}")
    return Field(name, source, info, lambda: _read_binary_file(name, where), read_paths=(where,))


def _read_text_file(name: str, where: str) -> str:
    try:
        with open(where, encoding="utf-8-sig", errors="replace", newline="") as f:
            return f.read()
    except FileNotFoundError:
        raise InputError(f"Input {name!r}: no file or directory at {where}; check the path.") from None


def _read_binary_file(name: str, where: str) -> bytes:
    try:
        with open(where, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise InputError(f"Input {name!r}: no file or directory at {where}; check the path.") from None


def _describe_directory(name: str, where: str, config: RLMConfig, source: Any) -> Field:
    walk = _walk_within(name, where, MAX_DIR_ENTRIES, with_sizes=True)
    table = filetables.for_folder(name, where, [rel for rel, _ in walk.files])
    if walk.truncated and (table is not None or not walk.files):  # a big dataset, or only partition folders so far
        whole = _walk_within(name, where, None, with_sizes=False)
        table = filetables.for_folder(name, where, [rel for rel, _ in whole.files])
    if table is not None:
        return describe_table(name, table, config, source)
    folder = documents.for_folder(name, where, walk.files, source, truncated=walk.truncated) \
        or image_folders.for_folder(name, where, walk.files, source, truncated=walk.truncated)
    if folder is not None:
        return folder
    total = sum(size for _, size in walk.files)
    by_ext: dict[str, int] = {}
    for rel, _ in walk.files:
        ext = posixpath.splitext(rel)[1].lower() or "(no extension)"
        by_ext[ext] = by_ext.get(ext, 0) + 1
    ranked = sorted(by_ext.items(), key=lambda kv: (-kv[1], kv[0]))
    parts = [f"{count:,} {ext}" for ext, count in ranked[:6]]
    if len(ranked) > 6:
        parts.append(f"{sum(c for _, c in ranked[6:]):,} other")
    plus = "+" if walk.truncated else ""
    subfolders = f", {walk.folders:,}{plus} subfolder{'' if walk.folders == 1 else 's'}" if walk.folders else ""
    detail = f"{len(walk.files):,}{plus} files{subfolders}" + (": " + ", ".join(parts) if parts else "")
    if walk.truncated:
        detail += f" (counted in the first {MAX_DIR_ENTRIES:,} entries)"
    shown = [rel for rel, _ in walk.files[:DIR_PREVIEW_FILES]] if config.preview_rows > 0 else []
    info = FieldInfo(name, "directory", "Mapping[str, str | bytes]", size_bytes=total, rows=len(walk.files),
                     est_tokens=round(total / CHARS_PER_TOKEN), preview="\n".join(one_line(s) for s in shown),
                     truncated=walk.truncated, path=where, detail=detail)
    return Field(name, source, info, lambda: DirectoryView(where, name), read_paths=(where,))




def _walk_within(name: str, where: str, limit: int | None, with_sizes: bool) -> FolderWalk:
    """The folder's listing (`walk_folder`); InputError naming the first link in it that leads out of it."""
    walk = walk_folder(where, limit, with_sizes)
    if walk.links_out:
        raise link_out_error(name, where, os.path.join(where, *walk.links_out[0].split("/")))
    return walk


class GlobFiles(Mapping[str, "str | bytes"]):
    """The files matched by a glob: relative path -> content (str, or bytes for binary files).

    Keys are relative to the pattern's fixed leading folder, its `root` (`logs/**/*.log` -> `app/1.log`).
    Contents are read on access, like a directory input, so binding a large glob reads nothing; binding
    refuses a match that leads out of the root (`check_within`), and a read never follows one.
    """

    def __init__(self, pattern: str, matches: list[str]) -> None:
        self.pattern = pattern
        parts = Path(pattern).parts
        fixed = list(_takewhile_fixed(parts[:-1]))
        self.root = Path(*fixed) if fixed else Path(".")
        self._base = os.path.abspath(self.root)
        self._paths = {Path(m).relative_to(self.root).as_posix() if _under(m, self.root) else Path(m).as_posix():
                       Path(os.path.abspath(m)) for m in matches}

    def __getitem__(self, key: str) -> str | bytes:
        path = self._paths[key]
        if not within(self._base, str(path)):
            raise InputError(f"{key} leads outside {self._base} through a symbolic link, so it is not read.")
        return decode_file(path.read_bytes())

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)

    def __repr__(self) -> str:
        return f"GlobFiles({self.pattern!r}, {len(self)} files)"

    @property
    def paths(self) -> tuple[str, ...]:
        """The matched files as absolute paths, in name order."""
        return tuple(os.path.abspath(p) for p in self._paths.values())


GLOB_CHARS = "*?["


def _takewhile_fixed(parts: tuple[str, ...]) -> Iterator[str]:
    for part in parts:
        if any(c in GLOB_CHARS for c in part):
            return
        yield part


def _under(path: str, root: Path) -> bool:
    try:
        Path(path).relative_to(root)
        return True
    except ValueError:
        return False


# ---- the family ---------------------------------------------------------------------------------------
def _describe(name: str, value: Any, config: RLMConfig) -> Field:
    if isinstance(value, Path) and any(c in GLOB_CHARS for c in str(value)) and not value.exists():
        pattern = os.path.expanduser(str(value))
        matches = sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))
        if not matches:
            raise InputError(f"Input {name!r}: no file matches {pattern}; check the pattern.")
        value = GlobFiles(pattern, matches)
    if isinstance(value, GlobFiles):
        from rlmnb.inputs._families.containers import describe_mapping

        root = os.path.abspath(value.root)
        check_within(name, root, value.paths)  # before anything of a match is read
        table = filetables.for_glob(name, root, value.pattern, value.paths)
        if table is not None:
            return describe_table(name, table, config, value)
        listed = [(os.path.relpath(p, root), os.path.getsize(p)) for p in value.paths]
        folder = documents.for_folder(name, root, listed, value, read_paths=value.paths) \
            or image_folders.for_folder(name, root, listed, value, read_paths=value.paths)
        if folder is not None:
            return folder

        field = describe_mapping(name, value, config)
        field.read_paths = value.paths
        return field
    if isinstance(value, DirectoryView):
        return _describe_path(name, Path(value.root), config, source=value)
    return _describe_path(name, value, config, source=value)


def _crossing(field: Field) -> dict[str, Any] | None:
    """Files, folders and tables in files are never copied: the kernel opens the same paths."""
    if field.info.kind == "file_table":
        return {"how": "reopen", "path": field.info.path, "plan": field.plan}
    return {"how": "path", "path": field.info.path}


def _reopen(name: str, spec: Mapping[str, Any]) -> Any:
    kind, path = spec["kind"], spec["path"]
    if kind == "file_table":
        return open_relation(TableFiles.from_dict(spec["plan"]), duck.cursor())
    if kind == "text_file":
        return _read_text_file(name, path)
    if kind == "binary_file":
        return _read_binary_file(name, path)
    return DirectoryView(path, name)


FAMILY = Family("files", ("text_file", "binary_file", "directory", "file_table"), _describe,
                accepts=lambda v: isinstance(v, Path | DirectoryView | GlobFiles), crossing=_crossing,
                reopen=_reopen, tables=("file_table",), sql=lambda relation: relation)


__all__ = ["DIR_PREVIEW_FILES", "FAMILY", "GLOB_CHARS", "GlobFiles", "MAX_DIR_ENTRIES"]
