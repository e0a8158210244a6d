"""Folders (and globs) of images: PNG, JPEG, GIF and WebP scans, charts and photos, for vision sub-calls.

Binding reads each image's header only (its first 64 KB, parsed in pure Python by `rlmnb._ground.images`; the
host never decodes an image), for the first `HEADERS_READ` files; the summary gives the count by format,
the bytes, and the sizes (the most common, and the range). In the sandbox the input is an `ImageFolder`:
a read-only mapping of relative path -> `ImageFile` (path, width, height, bytes), whose `.data` reads
the file; pass it, or a list of them, to `llm_query(prompt, images=[...])`.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rlmnb._ground.errors import InputError
from rlmnb._ground.images import FORMATS, ImageFile, image_tokens, read_header
from rlmnb.inputs._families.docread import LazyFolder
from rlmnb.inputs._records import Field, FieldInfo
from rlmnb.inputs._registry import Family

if TYPE_CHECKING:
    from rlmnb._ground.config import RLMConfig

HEADERS_READ = 2_000
SHOWN = 5


def is_image(path: str) -> bool:
    return os.path.splitext(path)[1].lower() in FORMATS


class ImageFolder(LazyFolder[ImageFile]):
    """Relative path -> ImageFile, its header read on first access; read-only."""

    def _make(self, path: str, key: str) -> ImageFile:
        head = read_header(path)
        if head is None:
            raise InputError(f"{key} is not a PNG, JPEG, GIF or WebP image.")
        return ImageFile(path, key, head[0], head[1], head[2], os.path.getsize(path))

    def __repr__(self) -> str:
        return f"<ImageFolder {os.path.basename(self.root.rstrip('/')) or self.root}: {len(self):,} images>"


def for_folder(name: str, root: str, files: Sequence[tuple[str, int]], source: Any, *,
               read_paths: tuple[str, ...] = (), truncated: bool = False) -> Field | None:
    """A folder (or glob) whose files are all images, as one lazy mapping; None otherwise.
    `files` are (path relative to `root`, size) pairs. An image whose header is unreadable is an InputError."""
    if not files or not all(is_image(rel) for rel, _ in files):
        return None
    formats: Counter[str] = Counter()
    sizes: Counter[tuple[int, int]] = Counter()
    tokens = 0
    shown: list[str] = []
    for i, (rel, size) in enumerate(files):
        if i >= HEADERS_READ:
            break
        path = rel if os.path.isabs(rel) else os.path.join(root, rel)
        head = read_header(path)
        if head is None:
            raise InputError(f"Input {name!r}: {rel} is not a PNG, JPEG, GIF or WebP image (its header says "
                             "otherwise); remove or convert it.")
        mime, w, h = head
        formats[mime.split("/")[1].upper()] += 1
        sizes[(w, h)] += 1
        tokens += image_tokens(w, h)
        if i < SHOWN:
            shown.append(f"{rel}  {w}x{h}, {size:,} bytes")
    read = min(len(files), HEADERS_READ)
    tokens = round(tokens * len(files) / read)
    (common, n), = sizes.most_common(1)
    widths, heights = [w for w, _ in sizes], [h for _, h in sizes]
    detail = (f"{len(files):,}{'+' if truncated else ''} images: "
              + ", ".join(f"{k:,} {f}" for f, k in formats.most_common())
              + f"; {common[0]}x{common[1]} px ({n:,} of {read:,})")
    if len(sizes) > 1:
        detail += f", from {min(widths)}x{min(heights)} to {max(widths)}x{max(heights)}"
    detail += "; pass them to llm_query(prompt, images=[...]) (a vision sub-model)"
    info = FieldInfo(name, "images", "ImageFolder", size_bytes=sum(s for _, s in files), rows=len(files),
                     est_tokens=tokens, preview="\n".join(shown), truncated=truncated, path=root, detail=detail)
    keys = [rel for rel, _ in files]
    return Field(name, source, info, lambda: ImageFolder(root, keys, name), read_paths=read_paths or (root,),
                 plan={"files": keys})


def _describe(name: str, value: Any, config: RLMConfig) -> Field:
    raise InputError(f"Input {name!r}: pass a folder of images as pathlib.Path(...).")  # reached through files


def _crossing(field: Field) -> dict[str, Any] | None:
    return {"how": "path", "path": field.info.path, "plan": field.plan}


def _reopen(name: str, spec: Mapping[str, Any]) -> Any:
    return ImageFolder(spec["path"], list((spec.get("plan") or {})["files"]), name)


FAMILY = Family("images", ("images",), _describe, crossing=_crossing, reopen=_reopen)


__all__ = ["FAMILY", "HEADERS_READ", "SHOWN", "ImageFolder", "for_folder", "is_image"]
