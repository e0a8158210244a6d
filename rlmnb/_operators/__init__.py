"""Semantic operators in the sandbox: `llm_map`, `llm_classify`, `llm_filter`; reading: `find_mentions`, `read_text`.

They read every item of a collection with the sub-model for a fraction of the calls a prompt per
item costs: items are packed into numbered prompts (the instruction once), answers come back as
JSON and are validated, broken ones are re-asked on their own. The work runs here in the sandbox,
next to the data and the user's output classes; every sub-call goes to the host as an ordinary
`llm_query_batched` batch (budget, limiter, cache, events), grouped under one map (rlmnb/maps.py).
Standard library and rlmnb's light modules only: this is imported inside the sandbox kernel.

    sources.py  items -> chunks of texts (tables streamed), results -> list / Series
    outputs.py  what an answer must be (str, int, float, bool, labels, pydantic, dataclass)
    packing.py  packs, the packed prompt, the reply parser
    driver.py   rounds, re-asks, budget stops; a table's chunks overlap in flight
    report.py   MapReport / ItemError records
    reading.py  find_mentions (where a text names some terms) and read_text (the sub-model reads a text in parts)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from rlmnb._ground.images import prepare_all
from rlmnb._operators.driver import MapDriver
from rlmnb._operators.outputs import output_spec
from rlmnb._operators.reading import find_mentions, make_readers
from rlmnb._operators.report import MapReport
from rlmnb._operators.sources import MapList, open_source, shape_result

DEFAULT_LIMITS = {"pack_tokens": 4_000, "pack_items": 50, "retries": 2}  # a bridge without map support


class MapBridge(Protocol):
    """The bridge calls llm_map uses (both sandboxes' bridges have them)."""

    def llm_query_batched(self, prompts: list[str], model: str | None = None) -> list[str]: ...


def _check_text(value: object, what: str, fn: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{fn}() takes the {what} as a str, got {type(value).__name__}.")
    return value


def _limit(value: Any, default: int, name: str, fn: str, minimum: int = 1) -> int:
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{fn}(): {name} must be a whole number of at least {minimum}, got {value!r}.")
    return value


def run_map(bridge: Any, items: Any, instruction: str, output: Any, *, operator: str, model: str | None = None,
            pack_tokens: int | None = None, pack_items: int | None = None, retries: int | None = None,
            quiet: bool = False, images: Any = None, note: str | None = None) -> Any:
    """The body of the three operators: open a map on the host, drive it, close it, shape the result.

    `note` is printed under the report (`column_note`: a column that already holds what the request names).

    `images` (one image, a list of images or None per item) sends each item alone with its images: a
    packed prompt cannot tie images to the items it numbers, and one item's images stay within what a
    provider takes per request (MAX_IMAGES, checked when the pack is sent). The images go with the
    item's re-asks too; they are counted in tokens and priced like llm_query's.
    """
    spec = output_spec(output)
    source = open_source(items)
    per_item = _item_images(images, source.length, operator)
    if per_item is not None:
        if pack_items not in (None, 1):
            raise ValueError(f"{operator}() with images sends one item per call; leave pack_items out.")
        pack_items = 1
    begin = getattr(bridge, "map_begin", None)
    info = {"operator": operator, "instruction": instruction, "output": spec.describe(), "items": source.length}
    plan: dict[str, Any] = dict(begin(info)) if callable(begin) else dict(DEFAULT_LIMITS)
    map_id = plan.get("map_id")
    batch = getattr(bridge, "map_batch", None)

    def send(prompts: list[str], positions: list[list[int]]) -> list[str]:
        if per_item is None:
            if map_id is not None and callable(batch):
                return list(batch(map_id, prompts, model))
            return list(bridge.llm_query_batched(prompts, model))
        pictures = [[image for p in pack for image in prepare_all(per_item[p], f"{operator}() item {p}")]
                    for pack in positions]  # read and checked when their pack is sent, not all up front
        if map_id is not None and callable(batch):
            return list(batch(map_id, prompts, model, pictures))
        return list(bridge.llm_query_batched(prompts, model, pictures))

    window = plan.get("max_prompt_tokens")
    if pack_tokens is not None and isinstance(window, int) and window > 0:
        pack_tokens = min(_limit(pack_tokens, 0, "pack_tokens", operator, 16), window)  # never past the window
    keys = source.index
    driver = MapDriver(instruction=instruction, spec=spec, send=send,
                       pack_tokens=_limit(pack_tokens, int(plan["pack_tokens"]), "pack_tokens", operator, 16),
                       pack_items=_limit(pack_items, int(plan["pack_items"]), "pack_items", operator),
                       retries=_limit(retries, int(plan["retries"]), "retries", operator, 0),
                       key=(lambda pos: keys[pos]) if keys is not None else (lambda pos: pos),
                       window=_window(plan, per_item is not None))
    try:
        driver.run(source)
    finally:
        report = driver.report(operator)
        end = getattr(bridge, "map_end", None)
        if map_id is not None and callable(end):
            figures = report.to_dict()
            figures["errors"] = [{"item": str(e.index), "reason": e.reason} for e in report.errors[:20]]
            end(map_id, figures)
    if not quiet:
        print(report.text() + (f"\n  {note}" if note else ""))
    attrs = {"llm_errors": [e.to_dict() for e in report.errors], "llm_map": report.to_dict()}
    return shape_result(source, driver.state.values, attrs)


def column_note(items: Any, request: str) -> str | None:
    """A note when `items` is a pandas DataFrame with a label-like text column (at most LABEL_COLUMN_VALUES
    distinct values) one of whose values the operator's request (instruction, condition or labels) names as a
    word, else None: code can select or count by that column for no sub-call. A model often asks a sub-model to
    label rows a column already labels; general advice does not change that step, a note naming the column can."""
    cls = type(items)
    if cls.__module__.split(".", 1)[0] != "pandas" or cls.__name__ != "DataFrame":
        return None
    said = " ".join(request.lower().split())
    for name in items.columns:
        column = items[name]
        if column.dtype.kind not in "OSU" and str(column.dtype) not in ("category", "string", "str"):
            continue
        try:  # the head first: a free-text column of a large table is passed over without hashing all of it
            if len(column.iloc[:LABEL_HEAD_ROWS].dropna().unique()) > LABEL_COLUMN_VALUES:
                continue
            values = column.dropna().unique()
        except Exception:  # noqa: S112 - an odd column (unhashable cells): it is no label column
            continue
        if len(values) > LABEL_COLUMN_VALUES:
            continue
        for value in values:
            key = " ".join(str(value).lower().split())
            if len(key) >= 3 and re.search(rf"(?<!\w){re.escape(key)}(?!\w)", said):
                return (f"note: the column {str(name)!r} already holds {str(value)!r}; to select or count by it, "
                        f"use code (e.g. frame[frame[{str(name)!r}] == {str(value)!r}]) rather than a sub-call per "
                        "row.")
    return None


LABEL_COLUMN_VALUES = 50  # a text column with more distinct values is no label column
LABEL_HEAD_ROWS = 10_000  # rows read first to pass over a free-text column cheaply


def _window(plan: dict[str, Any], images: bool) -> int:
    """Packs a map keeps in flight or queued across chunks: twice the host's concurrency limit, so its
    limiter stays busy while the next chunk is read; 0 (chunk after chunk) when the host gives no limit.
    Items with images go chunk after chunk: their pictures are read when their pack is sent."""
    limit = plan.get("concurrency")
    if images or not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        return 0
    return 2 * limit


def _item_images(images: Any, length: int | None, operator: str) -> list[Any] | None:
    if images is None:
        return None
    if isinstance(images, str | bytes) or not hasattr(images, "__iter__"):
        raise TypeError(f"{operator}() takes images as a list with one entry per item (an image, a list of "
                        "images, or None).")
    per = [[] if x is None else x for x in images]
    if length is not None and len(per) != length:
        raise ValueError(f"{operator}(): {length} items but {len(per)} image entries.")
    return per


def make_operators(bridge: Any) -> dict[str, Callable[..., Any]]:
    """The three sandbox functions over one bridge."""

    def llm_map(items: Any, instruction: str, output: Any = str, *, model: str | None = None,
                pack_tokens: int | None = None, pack_items: int | None = None, retries: int | None = None,
                images: Any = None) -> Any:
        """Apply `instruction` to every item; one validated result per item, in order (None where it failed).

        items: a list of str, a pandas Series/DataFrame (result on its index) or a table (streamed).
        output: str, int, float, bool, a list of labels, or a pydantic model / dataclass.
        images: one entry per item (an image, a list of images, or None) for a vision sub-model; each
            item then goes alone with its images (see llm_query).
        """
        text = _check_text(instruction, "instruction", "llm_map")
        if not text.strip():
            raise ValueError("llm_map() needs an instruction, e.g. 'Extract the customer's name'.")
        return run_map(bridge, items, text, output, operator="llm_map", model=model, pack_tokens=pack_tokens,
                       pack_items=pack_items, retries=retries, images=images, note=column_note(items, text))

    def llm_classify(items: Any, labels: Sequence[str], instruction: str = "", *, model: str | None = None,
                     pack_tokens: int | None = None, pack_items: int | None = None,
                     retries: int | None = None, images: Any = None) -> Any:
        """Give every item exactly one of `labels`; `instruction` says how to choose (optional).

        images: one entry per item, as for llm_map (each item then goes alone with its images).
        """
        if isinstance(labels, str) or not isinstance(labels, Sequence):
            raise TypeError("llm_classify() takes labels as a list of str, e.g. ['bug', 'billing', 'other'].")
        spec = output_spec(list(labels))  # a LabelSpec: checks the labels are distinct, non-empty strings
        text = _check_text(instruction, "instruction", "llm_classify").strip()
        text = (text + "\n\n" if text else "") + "Classify each item into exactly one of the labels."
        return run_map(bridge, items, text, spec, operator="llm_classify", model=model, pack_tokens=pack_tokens,
                       pack_items=pack_items, retries=retries, images=images,
                       note=column_note(items, "\n".join([*map(str, labels), instruction])))

    def llm_filter(items: Any, condition: str, *, model: str | None = None, pack_tokens: int | None = None,
                   pack_items: int | None = None, retries: int | None = None, images: Any = None) -> Any:
        """True for every item that meets `condition`, False otherwise (None where it failed).

        images: one entry per item, as for llm_map (each item then goes alone with its images).
        """
        text = _check_text(condition, "condition", "llm_filter").strip()
        if not text:
            raise ValueError("llm_filter() needs a condition, e.g. 'the ticket mentions a refund'.")
        instruction = f"Decide for each item whether this condition holds: {text}\nAnswer true or false."
        return run_map(bridge, items, instruction, bool, operator="llm_filter", model=model,
                       pack_tokens=pack_tokens, pack_items=pack_items, retries=retries, images=images,
                       note=column_note(items, text))

    return {"llm_map": llm_map, "llm_classify": llm_classify, "llm_filter": llm_filter}


__all__ = ["MapBridge", "MapList", "MapReport", "column_note", "find_mentions", "make_operators", "make_readers",
           "run_map"]
