"""Validating a submitted answer against a user's schema (a pydantic model or a dataclass)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from rlmnb._ground.errors import ConfigError

__all__ = ["AnswerSchema"]


class AnswerSchema:
    """Wraps a pydantic model or dataclass type; pydantic is imported only when a schema is used."""

    def __init__(self, schema: Any) -> None:
        if not isinstance(schema, type):
            raise ConfigError(f"schema must be a pydantic model class or a dataclass, got {type(schema).__name__}.")
        is_pydantic = hasattr(schema, "model_validate")
        if not (is_pydantic or dataclasses.is_dataclass(schema)):
            raise ConfigError(f"schema {schema.__name__} is neither a pydantic model nor a dataclass.")
        from pydantic import TypeAdapter

        self.schema = schema
        self.name = schema.__name__
        self._adapter = TypeAdapter(schema)

    def describe(self) -> dict[str, Any]:
        """What a trajectory records about the schema (replay needs the class itself again)."""
        return {"name": self.name, "json_schema": self._adapter.json_schema()}

    def json_schema_text(self) -> str:
        return json.dumps(self._adapter.json_schema(), indent=1)

    def validate(self, value: Any) -> Any:
        """The validated instance; ValueError with a short, model-readable message otherwise."""
        from pydantic import ValidationError

        try:
            return self._adapter.validate_python(value)
        except ValidationError as exc:
            lines = [f"- {'.'.join(str(p) for p in err['loc']) or '(value)'}: {err['msg']}" for err in exc.errors()]
            raise ValueError("\n".join(lines[:20])) from None

    def __repr__(self) -> str:
        return f"AnswerSchema({self.name})"
