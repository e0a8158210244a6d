"""What the fake OpenAI-compatible server answers: reply policies, latency, faults and reply shapes.

- A *script* of root dialogues, `{"model-name": ["reply 1", "reply 2", ...]}` (a dict or a JSON
  file): a request for a scripted model gets the reply numbered by the assistant turns already in
  its conversation, so one script serves any number of independent runs.
- A *responder* for every other model: a callable `f(messages) -> str`, an import path
  `"package.module:function"`, or a built-in: `"needle"` (the 7-digit number after "magic number
  is" in the prompt, else "NONE") and `"echo"` (the last user message).
- A reply may be a string or a *reply shape*, a dict as real providers send them: `{"content": None,
  "finish_reason": "content_filter"}`, `{"content": "...", "reasoning_content": "...",
  "finish_reason": "length"}`, or `{"choices": []}` (HTTP 200 with no choices at all).
- `latency`: seconds, or a seeded distribution ("uniform:0.05,0.15", "exp:0.1", "normal:0.1,0.02").
- `faults` at given rates, `FAULT_KINDS`: HTTP 429 and 500, a dropped connection, a hang, a
  malformed body, and the HTTP-200 non-answers "no_choices", "no_content" and "content_filter".
- Stop sequences in a request end the reply where the first of them starts, as providers do.
"""

from __future__ import annotations

import importlib
import json
import math
import random
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["BUILTIN_RESPONDERS", "FAULT_KINDS", "Latency", "Reply", "Responder", "completion_body", "draw_fault",
           "echo_responder", "image_text_responder", "image_tokens_of", "images_of", "load_responder", "load_script",
           "needle_responder", "plausible_tokens", "png_text", "shape", "text_of"]

Reply = str | dict[str, Any]
Responder = Callable[[list[dict[str, Any]]], Reply]
FAULT_KINDS = ("429", "500", "drop", "timeout", "malformed", "no_choices", "no_content", "content_filter")
_NEEDLE = re.compile(r"magic number is\D{0,20}?(\d{7})(?!\d)", re.IGNORECASE)


def text_of(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):  # OpenAI content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return str(content or "")


def needle_responder(messages: list[dict[str, Any]]) -> str:
    """The 7-digit number that follows "magic number is" in the conversation, else "NONE"."""
    for message in reversed(messages):
        found = _NEEDLE.search(text_of(message))
        if found:
            return found.group(1)
    return "NONE"


def echo_responder(messages: list[dict[str, Any]]) -> str:
    """The last user message, unchanged."""
    users = [m for m in messages if m.get("role") == "user"]
    return text_of(users[-1]) if users else ""


def images_of(message: Mapping[str, Any]) -> list[bytes]:
    """The bytes of a message's image parts (data URLs; a URL that is not data counts as no bytes)."""
    import base64

    content = message.get("content")
    found: list[bytes] = []
    for part in content if isinstance(content, list) else []:
        url = str(((part.get("image_url") or {}) if isinstance(part, Mapping) else {}).get("url", ""))
        if url.startswith("data:") and ";base64," in url:
            found.append(base64.b64decode(url.split(";base64,", 1)[1]))
    return found


def image_tokens_of(message: Mapping[str, Any]) -> int:
    """A provider's count of a message's images (OpenAI high detail, from each image's header)."""
    from rlmnb._ground.images import header, image_tokens

    sizes = [header(data) for data in images_of(message)]
    return sum(image_tokens(s[1], s[2]) if s else 85 for s in sizes)


def png_text(data: bytes) -> dict[str, str]:
    """The tEXt chunks of a PNG (keyword -> text): where a test writes what an image 'shows'."""
    import struct

    found: dict[str, str] = {}
    at = 8
    while at + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        if kind == b"tEXt":
            key, _, value = data[at + 8:at + 8 + length].partition(b"\0")
            found[key.decode("latin-1")] = value.decode("latin-1")
        at += 12 + length
    return found


def image_text_responder(messages: list[dict[str, Any]]) -> str:
    """A scripted 'vision' model: what the last image's PNG text says under "shows", else "NONE".
    It reads no pixels; tests draw the image and write what it shows into its metadata."""
    for message in reversed(messages):
        for data in reversed(images_of(message)):
            shows = png_text(data).get("shows")
            if shows is not None:
                return shows
    return "NONE"


BUILTIN_RESPONDERS: dict[str, Responder] = {"needle": needle_responder, "echo": echo_responder,
                                            "image_text": image_text_responder}


def load_responder(spec: str | Responder) -> Responder:
    """A callable as is, a built-in name, or "package.module:function"."""
    if callable(spec):
        return spec
    if spec in BUILTIN_RESPONDERS:
        return BUILTIN_RESPONDERS[spec]
    try:  # the shared deterministic behaviours (find_needle, count_labels, ...)
        from rlmnb.testing.responders import BUILTIN
    except ImportError:
        BUILTIN = {}
    if spec in BUILTIN:
        return BUILTIN[spec]
    module_name, sep, attr = spec.partition(":")
    if not sep:
        raise ValueError(f"responder {spec!r} is neither built in ({', '.join(BUILTIN_RESPONDERS)}) "
                         f"nor an import path like 'package.module:function'.")
    fn = getattr(importlib.import_module(module_name), attr)
    if not callable(fn):
        raise ValueError(f"responder {spec!r} is not callable.")
    return fn  # type: ignore[no-any-return]


def load_script(script: str | Path | Mapping[str, Any] | None) -> dict[str, list[Reply]]:
    """A script dict, or the path of a JSON file holding one; a reply is a string or a reply shape (see `shape`)."""
    if script is None:
        return {}
    data = json.loads(Path(script).read_text(encoding="utf-8")) if isinstance(script, str | Path) else script
    if not isinstance(data, Mapping) or not all(isinstance(v, list) for v in data.values()):
        raise ValueError('a script maps model names to lists of replies: {"model": ["reply 1", ...]}')
    return {str(k): [dict(r) if isinstance(r, Mapping) else str(r) for r in v] for k, v in data.items()}


class Latency:
    """Seconds to wait before answering: fixed, or drawn from a seeded distribution.

    Specs: a number, "fixed:S", "uniform:A,B", "exp:MEAN", "normal:MEAN,SD" (clipped at 0).
    """

    def __init__(self, spec: float | str = 0.0) -> None:
        self.spec = spec
        self.args: tuple[float, ...]
        if isinstance(spec, int | float):
            self.kind, self.args = "fixed", (float(spec),)
        else:
            kind, _, rest = str(spec).partition(":")
            if not rest:
                kind, rest = "fixed", kind
            try:
                self.kind, self.args = kind, tuple(float(x) for x in rest.split(","))
            except ValueError:
                self.kind, self.args = "?", ()
        arity = {"fixed": 1, "uniform": 2, "exp": 1, "normal": 2}
        if arity.get(self.kind) != len(self.args) or any(a < 0 for a in self.args):
            raise ValueError(f"latency {spec!r}: use seconds, 'uniform:A,B', 'exp:MEAN' or 'normal:MEAN,SD'.")

    def draw(self, rng: random.Random) -> float:
        a = self.args
        if self.kind == "fixed":
            return a[0]
        if self.kind == "uniform":
            return rng.uniform(a[0], a[1])
        if self.kind == "exp":
            return rng.expovariate(1.0 / a[0]) if a[0] > 0 else 0.0
        return max(0.0, rng.gauss(a[0], a[1]))


def plausible_tokens(text: str) -> int:
    """A cheap, stable token count (about four characters a token), like a provider would report."""
    return max(1, math.ceil(len(text) / 4)) if text else 0


def draw_fault(rng: random.Random, faults: Mapping[str, float]) -> str | None:
    """One of FAULT_KINDS drawn at its rate, or None."""
    u = rng.random()
    edge = 0.0
    for kind in FAULT_KINDS:
        edge += faults.get(kind, 0.0)
        if u < edge:
            return kind
    return None


def shape(reply: Reply, fault: str | None, stop: Any) -> dict[str, Any]:
    """The choice fields of a reply: {"choices": [...]} or {"content", "finish_reason", "reasoning_content"}."""
    out: dict[str, Any] = dict(reply) if isinstance(reply, Mapping) else {"content": str(reply)}
    out.setdefault("finish_reason", "stop")
    if fault == "no_choices":
        return {"choices": []}
    if fault == "no_content":
        out.update(content=None, finish_reason="stop")
    elif fault == "content_filter":
        out.update(content=None, finish_reason="content_filter")
    stops = [stop] if isinstance(stop, str) else [s for s in (stop or []) if isinstance(s, str) and s]
    text = out.get("content")
    if isinstance(text, str) and any(s in text for s in stops):
        out.update(content=text[:min(text.index(s) for s in stops if s in text)], finish_reason="stop")
    return out


def completion_body(model: str, fields: Mapping[str, Any], created: int, ident: str) -> dict[str, Any]:
    """An OpenAI chat.completion body for the choice fields of `shape`."""
    body: dict[str, Any] = {"id": ident, "object": "chat.completion", "created": created, "model": model,
                            "system_fingerprint": "fp_rlmnb_fake"}
    if "choices" in fields:
        body["choices"] = list(fields["choices"])
        return body
    message: dict[str, Any] = {"role": "assistant", "content": fields.get("content")}
    if fields.get("reasoning_content"):
        message["reasoning_content"] = fields["reasoning_content"]
    body["choices"] = [{"index": 0, "message": message, "logprobs": None, "finish_reason": fields["finish_reason"]}]
    return body
