"""The functions model code calls inside a sandbox, built over a synchronous bridge to the host.

The same code serves the local sandbox (a bridge into the run's event loop) and the kernel sandbox
(a bridge over loopback TCP), so `submit`, `FINAL_VAR` and `SHOW_VARS` behave identically in both.
This module must stay importable inside a bare kernel: standard library and rlmnb's light modules only.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from json.encoder import encode_basestring_ascii
from typing import Any, Protocol

from rlmnb._ground.errors import ConfigError, SubmitSignal
from rlmnb._ground.images import Image, prepare_all
from rlmnb._ground.jsonable import NotJSONable, to_jsonable
from rlmnb._operators import make_operators, make_readers
from rlmnb._sandbox.base import RESERVED_NAMES


class SyncBridge(Protocol):
    """Blocking calls from sandbox code to the host."""

    def llm_query(self, prompt: str, model: str | None = None, images: list[Image] | None = None) -> str: ...

    def llm_query_batched(self, prompts: list[str], model: str | None = None,
                          images: list[list[Image]] | None = None) -> list[str]: ...

    def rlm_query(self, prompt: str, inputs: dict[str, Any]) -> Any: ...

    def rlm_query_batched(self, prompts: list[str], inputs_list: list[dict[str, Any]] | None) -> list[Any]: ...


def _check_prompt(prompt: object, fn: str) -> str:
    if not isinstance(prompt, str):
        raise TypeError(f"{fn}() takes a str prompt, got {type(prompt).__name__}; build the text first "
                        f"(e.g. '\\n'.join(lines)).")
    return prompt


def _check_prompts(prompts: object, fn: str) -> list[str]:
    if isinstance(prompts, str) or not isinstance(prompts, Sequence | types.GeneratorType | map):
        raise TypeError(f"{fn}() takes a list of str prompts, got {type(prompts).__name__}.")
    items = list(prompts)
    for i, p in enumerate(items):
        if not isinstance(p, str):
            raise TypeError(f"{fn}() prompt {i} is a {type(p).__name__}, not a str.")
    return items


MAX_SUBMIT_BYTES = 8 << 20  # a submitted value's JSON (as the kernel sends it: ASCII, escaped); see bridge.REPLY_BYTES
MAX_SUBMIT_ITEMS = 400_000  # values in it, containers and dict keys included; see bridge.REPLY_ITEMS


def _submit_signal(value: Any) -> SubmitSignal:
    """The signal that ends the snippet: the value as plain JSON data, or why it cannot be accepted (not
    JSON-able, nested over 50 levels, or over MAX_SUBMIT_BYTES / MAX_SUBMIT_ITEMS), so the run goes on."""
    handling = sys.exc_info()[0]
    during = handling.__name__ if handling is not None and not issubclass(handling, SubmitSignal) else None
    try:
        data = to_jsonable(value)
    except NotJSONable as exc:
        return SubmitSignal(None, error=f"the value is a {type(value).__name__} ({exc})", during_exception=during)
    over = oversize(data, MAX_SUBMIT_BYTES, MAX_SUBMIT_ITEMS)
    if over is not None:
        return SubmitSignal(None, error=f"the value is too large to submit: {over}; submit a smaller value, such as "
                                        f"a summary, counts or the first rows", during_exception=during)
    return SubmitSignal(data, during_exception=during)


def oversize(data: Any, max_bytes: int, max_items: int) -> str | None:
    """Why plain JSON data (what `to_jsonable` returns) is over `max_bytes` bytes of ASCII-escaped JSON or
    `max_items` values, or None. One walk that stops at the first bound crossed, so a 200 MB string or a list
    of 100 M numbers costs no more than the bound to measure."""
    size, items = 0, 1
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            size += _json_str_bytes(value, max_bytes - size)
        elif isinstance(value, list | dict):
            items += len(value) * (2 if isinstance(value, dict) else 1)
            if items > max_items:
                return f"it holds more than {max_items:,} values"
            if isinstance(value, dict):
                size += 2 + 4 * len(value)  # braces, ': ' and ', '
                stack.extend(value)  # the keys (strings)
                stack.extend(value.values())
            else:
                size += 2 + 2 * len(value)
                stack.extend(value)
        elif isinstance(value, int) and not isinstance(value, bool):
            size += value.bit_length() * 30103 // 100_000 + 2
        else:  # float, bool, None
            size += 24
        if size > max_bytes:
            return f"its JSON is more than {max_bytes:,} bytes"
    return None


def _json_str_bytes(text: str, room: int) -> int:
    """Bytes `text` takes as an ASCII-escaped JSON string, counted in 1 MiB pieces and only up to past `room`."""
    if len(text) + 2 > room:
        return len(text) + 2  # over already: escaping only adds
    total, step = 2, 1 << 20
    for start in range(0, len(text), step):
        total += len(encode_basestring_ascii(text[start:start + step])) - 2
        if total > room:
            break
    return total


def user_variables(namespace: Mapping[str, Any], hidden: set[str]) -> list[tuple[str, str]]:
    """(name, short description) of variables made by model code."""
    out = []
    for name, value in namespace.items():
        if name.startswith("_") or name in hidden or isinstance(value, types.ModuleType):
            continue
        kind = type(value).__name__
        size = ""
        if hasattr(value, "shape"):
            size = f" shape={tuple(value.shape)}"
        elif hasattr(value, "__len__") and not callable(value):
            try:
                size = f" len={len(value)}"
            except Exception:
                size = ""
        out.append((name, f"{kind}{size}"))
    return out


def install(namespace: MutableMapping[str, Any], bridge: SyncBridge,
            tools: Mapping[str, Callable[..., Any]] | None = None) -> None:
    """Put the primitives (and the user's tools) into a sandbox namespace."""
    tools = dict(tools or {})
    hidden = set(RESERVED_NAMES) | set(tools) | {"In", "Out", "exit", "quit", "get_ipython", "open"}

    def llm_query(prompt: str, model: str | None = None, images: Any = None) -> str:
        """Ask the sub-model one question; returns its reply as a str.

        images: bytes, paths, PIL images or PDF pages (doc.pages[i]) the sub-model (a vision model) sees.
        """
        checked = _check_prompt(prompt, "llm_query")
        if images is None:
            return bridge.llm_query(checked, model)
        return bridge.llm_query(checked, model, prepare_all(images, "llm_query()"))

    def llm_query_batched(prompts: Sequence[str], model: str | None = None, images: Any = None) -> list[str]:
        """Ask many questions concurrently; order kept; failed slots are '[error] ...' strings.

        images: one list of images per prompt (see llm_query), or None.
        """
        items = _check_prompts(prompts, "llm_query_batched")
        if images is None or not items:
            return bridge.llm_query_batched(items, model) if items else []
        per = list(images)
        if len(per) != len(items):
            raise ValueError(f"llm_query_batched(): {len(items)} prompts but {len(per)} image lists.")
        prepared = [prepare_all(x, f"llm_query_batched() prompt {i}") if x is not None else [] for i, x in enumerate(per)]
        return bridge.llm_query_batched(items, model, prepared)

    def rlm_query(prompt: str, **inputs: Any) -> Any:
        """Hand a sub-question and its own inputs to a child run; returns the child's answer."""
        return bridge.rlm_query(_check_prompt(prompt, "rlm_query"), inputs)

    def rlm_query_batched(prompts: Sequence[str], inputs_list: Sequence[Mapping[str, Any]] | None = None) -> list[Any]:
        """Run several child runs concurrently; inputs_list[i] are the inputs of prompts[i]."""
        items = _check_prompts(prompts, "rlm_query_batched")
        copies = None if inputs_list is None else [dict(x) for x in inputs_list]
        if copies is not None and len(copies) != len(items):
            raise ValueError(f"rlm_query_batched(): {len(items)} prompts but {len(copies)} inputs.")
        return bridge.rlm_query_batched(items, copies) if items else []

    def submit(value: Any) -> None:
        """Give the final answer and end the run."""
        raise _submit_signal(value)

    def FINAL(value: Any) -> None:  # noqa: N802 - the name models are taught
        """Same as submit(value)."""
        raise _submit_signal(value)

    def FINAL_VAR(name: str) -> None:  # noqa: N802
        """Submit the value of the variable called `name`."""
        key = name.strip().strip("'\"") if isinstance(name, str) else name
        if not isinstance(key, str) or key not in namespace:
            known = ", ".join(n for n, _ in user_variables(namespace, hidden)) or "none yet"
            raise NameError(f"FINAL_VAR({name!r}): there is no variable of that name; variables: {known}.")
        raise _submit_signal(namespace[key])

    def SHOW_VARS() -> None:  # noqa: N802
        """Print the variables you have made, with their types and sizes."""
        rows = user_variables(namespace, hidden)
        if not rows:
            print("No variables yet.")
        for var, desc in rows:
            print(f"{var}: {desc}")

    from rlmnb.inputs._tables.duck import DEFAULT_MAX_ROWS, SQLEngine

    engine = SQLEngine(namespace)

    def sql(query: str, max_rows: int = DEFAULT_MAX_ROWS) -> Any:
        """Run DuckDB SQL over the table inputs, each under its input name; returns a pandas DataFrame."""
        return engine(query, max_rows)

    namespace["sql"] = sql
    namespace.update({
        "llm_query": llm_query, "llm_query_batched": llm_query_batched, "rlm_query": rlm_query,
        "rlm_query_batched": rlm_query_batched, "submit": submit, "FINAL": FINAL, "FINAL_VAR": FINAL_VAR,
        "SHOW_VARS": SHOW_VARS,
    })
    namespace.update(make_operators(bridge))  # llm_map, llm_classify, llm_filter
    namespace.update(make_readers(bridge))  # find_mentions, read_text
    namespace.update(tools)


def check_tools(tools: Sequence[Callable[..., Any]] | Mapping[str, Callable[..., Any]] | None) -> dict[str, Callable[..., Any]]:
    """Validate user tools: callables with names that do not clash with the built-in primitives."""
    if not tools:
        return {}
    items = dict(tools) if isinstance(tools, Mapping) else {getattr(t, "__name__", ""): t for t in tools}
    for name, fn in items.items():
        if not callable(fn):
            raise ConfigError(f"tool {name!r} is not callable; pass functions.")
        if not name.isidentifier() or name == "<lambda>":
            raise ConfigError(f"tool {fn!r} needs a valid Python name; pass a dict {{'name': fn}} for lambdas.")
        if name in RESERVED_NAMES:
            raise ConfigError(f"tool name {name!r} is reserved for a sandbox built-in; rename the function.")
    return items


__all__ = ["MAX_SUBMIT_BYTES", "MAX_SUBMIT_ITEMS", "SyncBridge", "check_tools", "install", "oversize", "user_variables"]
