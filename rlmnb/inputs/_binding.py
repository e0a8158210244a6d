"""Binding a run's inputs: every value described by its family, then the summary the root model sees."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rlmnb._ground.errors import InputError
from rlmnb.inputs._records import Field, InputsSummary, _type_name
from rlmnb.inputs._registry import describe
from rlmnb.inputs._summary import render_summary

if TYPE_CHECKING:
    from rlmnb._ground.config import RLMConfig


def bind_inputs(values: Mapping[str, Any], config: RLMConfig) -> tuple[tuple[Field, ...], InputsSummary]:
    """Describe every input (cheaply, by sampling) and render the summary the root model sees."""
    if not isinstance(values, Mapping):
        raise InputError(f"inputs must be a mapping of name -> value (e.g. a dict), got {_type_name(values)}.")
    fields = tuple(describe(name, value, config) for name, value in values.items())
    return fields, render_summary([f.info for f in fields], config)


__all__ = ["bind_inputs"]
