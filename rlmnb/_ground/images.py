"""Images for vision sub-calls: what `llm_query(prompt, images=[...])` accepts, and what crosses to the host.

Sandbox side, `prepare` turns what model code passes into an `Image` (PNG, JPEG, GIF or WebP bytes):
bytes, a path (str or os.PathLike), a PIL image, an `ImageFile` of a folder input, or a document page
(anything with an `.image()` method, e.g. `doc.pages[i]` of a PDF). An image whose longest side is over
`MAX_SIDE` pixels is resized with Pillow there (providers downscale beyond that and bill the upload),
so the host never decodes an image: it reads sizes from the file header alone (`header`), in pure Python,
and refuses anything that is not one of the four formats, over `MAX_BYTES`, or claims over `MAX_PIXELS`.

`ocr(data)` reads the text of an image with tesseract (sandbox side, opt-in: the `ocr` extra and the
tesseract program, imported and run only when called).

Host side, `Image.part()` is the OpenAI-style content part litellm passes to every vision provider,
and `image_tokens` is OpenAI's high-detail estimate (85 + 170 per 512-px tile after fitting the image
in 2048 px and its short side in 768 px), used for the budget before a call is sent.
Standard library only at import: the kernel imports this module.
"""

from __future__ import annotations

import base64
import hashlib
import io
import math
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MAX_SIDE = 2048
MAX_BYTES = 20 * 2**20
MAX_PIXELS = 100_000_000
MAX_IMAGES = 50  # per call
THUMB_SIDE = 96  # px, the widget's thumbnail (made in the sandbox, where images may be decoded)
MAX_THUMB_BYTES = 64 * 2**10
FORMATS = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
           ".webp": "image/webp"}


class ImageError(ValueError):
    """An image that cannot be sent: one sentence naming it and what to do."""


@dataclass(frozen=True)
class Image:
    """Image bytes ready to send: `mime` is image/png, image/jpeg, image/gif or image/webp."""

    data: bytes
    mime: str
    width: int
    height: int
    thumb: bytes = b""  # a small PNG for the views, made in the sandbox ("" without Pillow)

    @property
    def sha(self) -> str:
        return hashlib.sha256(self.data).hexdigest()[:16]

    def part(self) -> dict[str, Any]:
        """The OpenAI-style content part (a data URL)."""
        url = f"data:{self.mime};base64,{base64.b64encode(self.data).decode('ascii')}"
        return {"type": "image_url", "image_url": {"url": url}}

    def describe(self) -> dict[str, Any]:
        """What events and views record of it: never the bytes; the thumbnail as a data URL when there is one."""
        out: dict[str, Any] = {"sha": self.sha, "mime": self.mime, "width": self.width, "height": self.height,
                               "bytes": len(self.data)}
        if self.thumb:
            out["thumb"] = f"data:image/png;base64,{base64.b64encode(self.thumb).decode('ascii')}"
        return out

    def __repr__(self) -> str:
        return f"<Image {self.mime} {self.width}x{self.height}, {len(self.data):,} bytes>"


def header(data: bytes) -> tuple[str, int, int] | None:
    """(mime, width, height) from the first bytes of a PNG, JPEG, GIF or WebP file; None for anything else."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR":
        w, h = struct.unpack(">II", data[16:24])
        return "image/png", w, h
    if data[:6] in (b"GIF87a", b"GIF89a"):
        w, h = struct.unpack("<HH", data[6:10])
        return "image/gif", w, h
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        chunk = data[12:16]
        if chunk == b"VP8 " and len(data) >= 30:
            w, h = struct.unpack("<HH", data[26:30])
            return "image/webp", w & 0x3FFF, h & 0x3FFF
        if chunk == b"VP8L" and len(data) >= 25:
            bits = int.from_bytes(data[21:25], "little")
            return "image/webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
        if chunk == b"VP8X" and len(data) >= 30:
            return "image/webp", int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
        return None
    if data[:2] == b"\xff\xd8":
        return _jpeg(data)
    return None


def _jpeg(data: bytes) -> tuple[str, int, int] | None:
    at = 2
    for _ in range(1000):  # markers before the frame header; a hostile file cannot loop forever
        while at < len(data) and data[at] == 0xFF:
            at += 1
        if at + 3 > len(data):
            return None
        marker = data[at]
        length = struct.unpack(">H", data[at + 1:at + 3])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            if at + 8 > len(data):
                return None
            h, w = struct.unpack(">HH", data[at + 4:at + 8])
            return "image/jpeg", w, h
        at += 1 + length
    return None


def read_header(path: str) -> tuple[str, int, int] | None:
    """`header` of a file, reading at most 64 KB of it."""
    with open(path, "rb") as f:
        return header(f.read(65536))


def image_tokens(width: int, height: int) -> int:
    """OpenAI's high-detail token count for an image of this size (see the module docstring)."""
    if width <= 0 or height <= 0:
        return 85
    scale = min(1.0, MAX_SIDE / max(width, height))
    w, h = width * scale, height * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def from_wire(data: bytes, what: str = "the image", thumb: bytes = b"") -> Image:
    """An Image from untrusted bytes, checked by its header only (the host never decodes images); a
    thumbnail that is not a small PNG is dropped."""
    if len(data) > MAX_BYTES:
        raise ImageError(f"{what} is {len(data):,} bytes, over the {MAX_BYTES:,}-byte limit; resize it.")
    found = header(data)
    if found is None:
        raise ImageError(f"{what} is not a PNG, JPEG, GIF or WebP image; convert it (PIL: image.save(buf, 'PNG')).")
    mime, w, h = found
    if w * h > MAX_PIXELS or w == 0 or h == 0:
        raise ImageError(f"{what} claims {w}x{h} pixels; that is not an image a model can read.")
    small = header(thumb) if thumb and len(thumb) <= MAX_THUMB_BYTES else None
    keep = small is not None and small[0] == "image/png" and max(small[1], small[2]) <= THUMB_SIDE
    return Image(data, mime, w, h, thumb if keep else b"")


@dataclass(frozen=True)
class ImageFile:
    """One image of a folder input: its path and header size; `.data` reads the file."""

    path: str
    key: str
    mime: str
    width: int
    height: int
    size: int

    @property
    def data(self) -> bytes:
        with open(self.path, "rb") as f:
            return f.read(MAX_BYTES + 1)

    def ocr(self, lang: str = "eng") -> str:
        """The text tesseract reads in this image (see `ocr`)."""
        return ocr(self.data, self.key, lang)

    def __repr__(self) -> str:
        return f"<ImageFile {self.key} {self.width}x{self.height}, {self.size:,} bytes>"


def prepare(value: Any, what: str = "the image") -> Image:
    """An Image from what model code passes (see the module docstring), resized to MAX_SIDE if larger."""
    if isinstance(value, Image):
        return value
    if isinstance(value, ImageFile):
        data = value.data
        what = value.key
    elif isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
    elif callable(getattr(value, "image", None)):  # before str: a document page is a str with .image()
        data = value.image()
    elif isinstance(value, str | os.PathLike):
        path = os.fspath(value)
        what = os.path.basename(path) or path
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_BYTES + 1)
        except OSError as e:
            raise ImageError(f"cannot read the image {path} ({e.strerror}).") from None
    elif type(value).__module__.split(".")[0] == "PIL":
        return _shrink(value, what)
    else:
        raise ImageError(f"{what} is a {type(value).__name__}; pass bytes, a path, a PIL image or a PDF page "
                         "(doc.pages[i]).")
    image = from_wire(data, what)
    if max(image.width, image.height) <= MAX_SIDE:
        return _thumbnailed(image)
    pil = _pil()
    with pil.open(io.BytesIO(image.data)) as opened:
        return _shrink(opened, what)


def _thumbnailed(image: Image) -> Image:
    """The image with a THUMB_SIDE-px PNG thumbnail, when Pillow is here (sandbox side)."""
    try:
        from PIL import Image as PILImage
    except ImportError:
        return image
    try:
        with PILImage.open(io.BytesIO(image.data)) as opened:
            return Image(image.data, image.mime, image.width, image.height, _thumb(opened))
    except Exception:  # a thumbnail is a nicety; an image Pillow cannot read still goes to the model
        return image


def _thumb(pil_image: Any) -> bytes:
    small = pil_image.copy()
    small.thumbnail((THUMB_SIDE, THUMB_SIDE))
    if small.mode not in ("RGB", "RGBA", "L", "LA", "P"):
        small = small.convert("RGB")
    out = io.BytesIO()
    small.save(out, format="PNG", optimize=True)
    return out.getvalue()


def prepare_all(images: Any, what: str) -> list[Image]:
    """A list of Images from one call's `images` argument (a sequence, or one image)."""
    items = list(images) if isinstance(images, Sequence | tuple) and not isinstance(images, str | bytes) \
        else [images]
    if len(items) > MAX_IMAGES:
        raise ImageError(f"{what} has {len(items)} images, over the {MAX_IMAGES} a call may carry; split them.")
    return [prepare(item, f"{what} image {i}") for i, item in enumerate(items)]


def _pil() -> Any:
    try:
        from PIL import Image as PILImage
    except ImportError:
        raise ImageError("resizing an image needs Pillow, which is not installed; pip install pillow.") from None
    return PILImage


OCR_PROGRAM = ("install the tesseract program (Debian/Ubuntu: apt-get install tesseract-ocr; macOS: brew install "
               "tesseract)")


def ocr(data: bytes, what: str = "the image", lang: str = "eng") -> str:
    """The text tesseract reads in an image (PNG, JPEG, GIF or WebP bytes), through pytesseract.

    Optional: pytesseract (the `ocr` extra) is imported and the `tesseract` program run only here. Raises
    ImageError for an image `from_wire` refuses, and with the install command when either is missing or
    `lang`'s language data is not installed.
    """
    image = from_wire(data, what)
    try:
        import pytesseract
    except ImportError:
        raise ImageError(f"OCR needs pytesseract, which is not installed; run pip install 'rlmnb[ocr]' and "
                         f"{OCR_PROGRAM}.") from None
    with _pil().open(io.BytesIO(image.data)) as opened:
        try:
            return str(pytesseract.image_to_string(opened, lang=lang))
        except pytesseract.TesseractNotFoundError:
            raise ImageError(f"OCR needs the tesseract program, which is not installed here; {OCR_PROGRAM}."
                             ) from None
        except pytesseract.TesseractError as e:
            raise ImageError(f"tesseract cannot read {what} with lang={lang!r} ({str(e.message).strip()}); "
                             f"install that language's data (Debian: apt-get install tesseract-ocr-{lang}) or "
                             "pass another lang.") from None


def _shrink(pil_image: Any, what: str) -> Image:
    w, h = pil_image.size
    if w * h > MAX_PIXELS:
        raise ImageError(f"{what} is {w}x{h} pixels, over {MAX_PIXELS:,}; crop or resize it first.")
    if max(w, h) > MAX_SIDE:
        scale = MAX_SIDE / max(w, h)
        pil_image = pil_image.resize((max(1, round(w * scale)), max(1, round(h * scale))))
    if pil_image.mode not in ("RGB", "RGBA", "L", "LA", "P"):
        pil_image = pil_image.convert("RGB")
    out = io.BytesIO()
    pil_image.save(out, format="PNG")
    return from_wire(out.getvalue(), what, _thumb(pil_image))


__all__ = ["FORMATS", "MAX_SIDE", "OCR_PROGRAM", "Image", "ImageError", "ImageFile", "from_wire", "header",
           "image_tokens", "ocr", "prepare", "prepare_all", "read_header"]
