"""The settings of `%%rlm`: traits settable with `%config RLMMagics.<name> = ...` and where each comes from.

Every RLMConfig setting becomes a trait whose help is the setting's documentation in config.py (so
`%config RLMMagics` documents them without a second copy), beside the magic's own defaults (model,
sandbox, widget...). `RLMMagics` (magic.py) inherits them all; this module knows nothing of a cell.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any

from IPython.core.error import UsageError
from traitlets import Any as TAny
from traitlets import Bool, Enum, Float, Int, List, TraitType, Unicode, Union
from traitlets.config import Configurable

from rlmnb._ground.config import SANDBOXES, RLMConfig
from rlmnb._ground.errors import RLMError
from rlmnb._ground.flags import setting_docs
from rlmnb._notebook.report import ENV_MODEL, ENV_SUB_MODEL

__all__ = ["ENV_MODEL", "ENV_SUB_MODEL", "SETTING_TRAITS", "MagicDefaults", "RLMSettings", "setting_docs"]

_SIMPLE_TRAITS: dict[str, type[TraitType[Any, Any]]] = {"int": Int, "float": Float, "str": Unicode, "bool": Bool}


def _trait_for(annotation: str, default: Any, help_text: str) -> TraitType[Any, Any]:
    """A config trait matching a setting's annotation ("int | None", "tuple[str, ...]", ...)."""
    parts = [p.strip() for p in annotation.split("|")]
    optional = "None" in parts
    kinds = [p for p in parts if p != "None"]
    trait: TraitType[Any, Any]
    if kinds == ["tuple[str, ...]"]:
        trait = List(Unicode(), default_value=list(default), help=help_text)
    elif kinds and all(k in _SIMPLE_TRAITS for k in kinds):
        if len(kinds) == 1:
            trait = _SIMPLE_TRAITS[kinds[0]](default, allow_none=optional, help=help_text)
        else:
            trait = Union([_SIMPLE_TRAITS[k]() for k in kinds], default_value=default, allow_none=optional,
                          help=help_text)
    else:  # a shape we do not know: accept any value and let RLMConfig.validate judge it
        trait = TAny(default, help=help_text)
    return trait.tag(config=True)


def _setting_traits() -> dict[str, TraitType[Any, Any]]:
    docs = setting_docs()
    traits: dict[str, TraitType[Any, Any]] = {}
    for f in dataclasses.fields(RLMConfig):
        if f.name in ("sandbox", "extra") or f.default is dataclasses.MISSING:
            continue
        traits[f.name] = _trait_for(str(f.type), f.default, docs.get(f.name, ""))
    return traits


class MagicDefaults(Configurable):
    """The magic's own defaults (models, sandbox, display); RLMSettings adds every RLMConfig setting."""

    model = Unicode("", help="Root model when -m is not given: a litellm model name or the name of a "
                    "variable holding a model object. Empty: $RLMNB_MODEL.").tag(config=True)
    sub_model = Unicode("", help="Sub-model when -s is not given (same forms as model). Empty: "
                        "$RLMNB_SUB_MODEL, then the root model.").tag(config=True)
    sandbox = Enum(SANDBOXES, default_value="kernel", help="Where the model's code runs: 'local' (a "
                   "namespace in this kernel) or 'kernel' (a separate process).").tag(config=True)
    quiet = Bool(False, help="Show no widget by default (as --quiet).").tag(config=True)
    interpolate = Bool(True, help="Fill {name} in the question from your namespace (--no-interpolate "
                       "turns it off for one cell).").tag(config=True)
    keep_session = Bool(True, help="Keep the last run's sandbox open so %%rlm --continue can follow up; "
                        "it is closed when the next run starts.").tag(config=True)
    widget_interval = Float(0.25, help="Seconds between live widget updates (at most ~4 per second by "
                            "default).").tag(config=True)
    embed_trajectory = Bool(True, help="Save the trajectory JSON in the cell output (what the JupyterLab "
                            "extension renders); turn off to keep notebooks of very large runs small.").tag(config=True)

    def run_config(self) -> RLMConfig:
        """The RLMConfig the %config settings make; a bad value is a UsageError naming the setting."""
        values = {name: getattr(self, name) for name in SETTING_TRAITS}
        for name in ("secret_env", "allow_paths", "allow_network"):
            if name in values:
                values[name] = tuple(values[name])
        try:
            return RLMConfig(**values).validate()
        except RLMError as exc:
            raise UsageError("A %config RLMMagics setting is invalid: "
                             f"{str(exc).strip() or type(exc).__name__}") from None

    def config_report(self) -> str:
        """The effective settings, grouped by topic, and where each comes from (default, %config, environment)."""
        from rlmnb._notebook.report import config_report

        return config_report(self)

    def confinement_line(self) -> str:
        """Which confinement a %%rlm run with these settings gets (see sandbox/confinement.py)."""
        from rlmnb._sandbox.confinement.policy import resolve

        values = {name: getattr(self, name) for name in ("confinement", "allow_paths", "allow_network", "sandbox")}
        try:
            return resolve(values["confinement"], values["allow_paths"], values["allow_network"],
                           sandbox=values["sandbox"]).describe()
        except RLMError as exc:
            return f"invalid settings: {str(exc).strip() or type(exc).__name__}"


def _origin(obj: Configurable, name: str) -> str:
    trait = obj.traits()[name]
    return "" if getattr(obj, name) == trait.default() else "  (set)"


# The run settings as a base class of RLMMagics, so `%config RLMMagics` lists each with its help.
RLMSettings: type[MagicDefaults] = types.new_class(
    "RLMSettings", (MagicDefaults,),
    exec_body=lambda ns: ns.update(__doc__="Every RLMConfig setting as a configurable trait (defaults: RLMConfig's).",
                                   __module__=__name__, **_setting_traits()))
SETTING_TRAITS: tuple[str, ...] = tuple(RLMSettings.class_own_traits(config=True))
