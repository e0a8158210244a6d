"""What one llm_map answer must be, told to the sub-model and checked on the way back.

`output_spec(output)` accepts `str`, `int`, `float`, `bool`, a list of allowed labels, a pydantic model
or a dataclass. Each spec says what to ask for (`describe`, one line for the prompt) and turns a parsed
JSON value into the result or raises `ValueError` with a reason short enough to quote in a re-ask.
Standard library only: this runs inside the sandbox kernel, next to the user's classes.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from collections.abc import Sequence
from typing import Any

_TRUE = {"true", "yes", "y", "1"}
_FALSE = {"false", "no", "n", "0"}


class OutputSpec:
    """Base: how a result is described and validated.

    `textual`: results are strings, so an item that failed is marked `"[error] <reason>"` in place (a count
    of the results then shows it); a typed result (number, bool, record) holds None there instead.
    """

    name = "str"
    textual = True

    def describe(self) -> str:
        return "a JSON string"

    def validate(self, value: Any) -> Any:
        if isinstance(value, str):
            return value
        if value is None or isinstance(value, dict | list):
            raise ValueError(f"expected a string, got {json.dumps(value)[:80]}")
        return str(value)


class IntSpec(OutputSpec):
    name = "int"
    textual = False

    def describe(self) -> str:
        return "a JSON integer"

    def validate(self, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError(f"expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip().replace(",", ""))
            except ValueError:
                pass
        raise ValueError(f"expected an integer, got {json.dumps(value)[:80]}")


class FloatSpec(OutputSpec):
    name = "float"
    textual = False

    def describe(self) -> str:
        return "a JSON number"

    def validate(self, value: Any) -> Any:
        number: float | None = None
        if isinstance(value, int | float) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value.strip().replace(",", ""))
            except ValueError:
                number = None
        if number is None or not math.isfinite(number):
            raise ValueError(f"expected a finite number, got {json.dumps(value)[:80]}")
        return number


class BoolSpec(OutputSpec):
    name = "bool"
    textual = False

    def describe(self) -> str:
        return "JSON true or false"

    def validate(self, value: Any) -> Any:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise ValueError(f"expected true or false, got {json.dumps(value)[:80]}")


class LabelSpec(OutputSpec):
    """One of a fixed list of labels; case and surrounding space are forgiven, anything else is not."""

    name = "label"

    def __init__(self, labels: Sequence[str]) -> None:
        self.labels = list(labels)
        self._exact = {label: label for label in self.labels}
        self._folded = {label.strip().casefold(): label for label in self.labels}

    def describe(self) -> str:
        return "exactly one of these labels (a JSON string): " + ", ".join(json.dumps(x) for x in self.labels)

    def validate(self, value: Any) -> Any:
        if isinstance(value, str):
            exact = self._exact.get(value)
            if exact is not None:
                return exact  # the label object itself: a million results share a handful of strings
            found = self._folded.get(value.strip().strip("\"'").strip().casefold())
            if found is not None:
                return found
        shown = ", ".join(self.labels[:8]) + (" ..." if len(self.labels) > 8 else "")
        raise ValueError(f"{json.dumps(value)[:80]} is not one of the labels ({shown})")


class PydanticSpec(OutputSpec):
    """A pydantic model: the JSON schema goes into the prompt, `model_validate` checks the reply."""

    textual = False

    def __init__(self, model: type[Any]) -> None:
        self.model = model
        self.name = model.__name__

    def describe(self) -> str:
        schema = json.dumps(self.model.model_json_schema(), separators=(",", ":"))
        return f"a JSON object matching this JSON schema: {schema}"

    def validate(self, value: Any) -> Any:
        try:
            return self.model.model_validate(value)
        except Exception as exc:  # pydantic.ValidationError, without importing pydantic here
            first = str(exc).splitlines()
            raise ValueError(f"does not match {self.name}: {' '.join(first[:3])[:200]}") from None


_PLAIN = {str: "string", int: "integer", float: "number", bool: "boolean"}


class DataclassSpec(OutputSpec):
    """A dataclass: its fields become a JSON object description; plain field types are checked."""

    textual = False

    def __init__(self, cls: type[Any]) -> None:
        self.cls = cls
        self.name = cls.__name__
        try:
            hints = typing.get_type_hints(cls)
        except Exception:  # unresolvable annotations: accept any value for those fields
            hints = {}
        self.fields = [(f.name, hints.get(f.name, Any), f.default is dataclasses.MISSING
                        and f.default_factory is dataclasses.MISSING) for f in dataclasses.fields(cls) if f.init]
        self._checks = {name: _field_spec(hint) for name, hint, _ in self.fields}

    def describe(self) -> str:
        parts = []
        for name, hint, required in self.fields:
            kind = _PLAIN.get(hint, getattr(hint, "__name__", None) or str(hint).replace("typing.", ""))
            parts.append(f"{json.dumps(name)}: {kind}{'' if required else ' (optional)'}")
        return "a JSON object with the keys {" + ", ".join(parts) + "}"

    def validate(self, value: Any) -> Any:
        if not isinstance(value, dict):
            raise ValueError(f"expected a JSON object for {self.name}, got {json.dumps(value)[:80]}")
        names = {name for name, _, _ in self.fields}
        missing = [name for name, _, required in self.fields if required and name not in value]
        if missing:
            raise ValueError(f"{self.name} is missing {', '.join(missing)}")
        kwargs = {}
        for key, item in value.items():
            if key not in names:
                continue  # extra keys are dropped, as pydantic does by default
            check = self._checks.get(key)
            try:
                kwargs[key] = check.validate(item) if check is not None else item
            except ValueError as exc:
                raise ValueError(f"{self.name}.{key}: {exc}") from None
        try:
            return self.cls(**kwargs)
        except Exception as exc:  # __post_init__ checks of the user's class
            raise ValueError(f"{self.name}({', '.join(kwargs)}) failed: {exc}") from None


def _field_spec(hint: Any) -> OutputSpec | None:
    if hint in (str, int, float, bool):
        return output_spec(hint)
    return None


def output_spec(output: Any) -> OutputSpec:
    """The spec for llm_map's `output` argument; TypeError with the accepted forms otherwise."""
    if isinstance(output, OutputSpec):
        return output
    if output is str:
        return OutputSpec()
    if output is bool:
        return BoolSpec()
    if output is int:
        return IntSpec()
    if output is float:
        return FloatSpec()
    if isinstance(output, list | tuple) and not isinstance(output, str):
        labels = list(output)
        if not labels or not all(isinstance(x, str) and x.strip() for x in labels):
            raise TypeError("output labels must be a non-empty list of non-empty strings, e.g. ['bug', 'billing'].")
        if len(set(labels)) != len(labels):
            raise TypeError("output labels must be distinct.")
        return LabelSpec(labels)
    if isinstance(output, type) and hasattr(output, "model_validate") and hasattr(output, "model_json_schema"):
        return PydanticSpec(output)
    if isinstance(output, type) and dataclasses.is_dataclass(output):
        return DataclassSpec(output)
    raise TypeError(f"output must be str, int, float, bool, a list of labels, a pydantic model or a dataclass; "
                    f"got {output!r}.")


__all__ = [
    "BoolSpec", "DataclassSpec", "FloatSpec", "IntSpec", "LabelSpec", "OutputSpec", "PydanticSpec",
    "output_spec",
]
