"""The settings of `%%rlm`: traits settable with `%config RLMMagics.<name> = ...`, where each comes from,
and the reports of them.

Every RLMConfig setting becomes a trait whose help is the setting's documentation in config.py (so
`%config RLMMagics` documents them without a second copy), beside the magic's own defaults (model,
sandbox, widget...). `RLMMagics` (magic.py) inherits them all; this module knows nothing of a cell.

`config_report` is `%rlm config` grouped by topic; `models_report` is `%rlm models`: which models a
cell would use and whether each provider's key is set (the value is never shown), as jupyter-ai's
`%ai list` does. Both only read: the magics' traits, the environment and the last run. Neither imports
litellm: a key check that needs it says so instead of spending seconds loading it.
"""

from __future__ import annotations

import dataclasses
import os
import types
from typing import Any

from IPython.core.error import UsageError
from traitlets import Any as TAny
from traitlets import Bool, Enum, Float, Int, List, TraitType, Unicode, Union
from traitlets.config import Configurable

from rlmnb._ground.config import SANDBOXES, RLMConfig
from rlmnb._ground.errors import RLMError
from rlmnb._ground.flags import setting_docs

__all__ = ["ENV_MODEL", "ENV_SUB_MODEL", "PROVIDER_KEYS", "SETTING_TRAITS", "TOPICS", "MagicDefaults", "RLMSettings",
           "config_report", "key_source", "key_status", "models_report", "setting_docs"]

# the environment variables the magic reads model names from (after -m/-s and %config)
ENV_MODEL = "RLMNB_MODEL"
ENV_SUB_MODEL = "RLMNB_SUB_MODEL"

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
        for name in ("secret_env", "allow_paths", "allow_network", "models"):
            if name in values:
                values[name] = tuple(values[name])
        try:
            return RLMConfig(**values).validate()
        except RLMError as exc:
            raise UsageError("A %config RLMMagics setting is invalid: "
                             f"{str(exc).strip() or type(exc).__name__}") from None

    def config_report(self) -> str:
        """The effective settings, grouped by topic, and where each comes from (default, %config, environment)."""
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


# ---- the reports: `%rlm config` and `%rlm models` ----------------------------------------------

# (topic, settings): the order of `%rlm config`; a setting no topic names lands under "Other"
TOPICS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Models", ("model", "sub_model", "models", "max_retries", "request_timeout")),
    ("Budget", ("max_iterations", "max_llm_calls", "max_tokens", "max_cost", "max_time")),
    ("Sandbox", ("sandbox", "timeout", "memory_limit", "keep_session", "secret_env", "confinement", "allow_paths",
                 "allow_network", "allow_model_code_on_dask_cluster")),
    ("Sub-calls", ("max_concurrency", "min_concurrency", "cache", "max_sub_prompt_tokens", "pack_tokens",
                   "pack_items", "map_retries")),
    ("What the root model sees", ("max_output_chars", "max_context_tokens", "compaction", "summary_max_tokens",
                                  "preview_chars", "preview_rows", "max_columns_shown", "max_event_chars", "instructions",
                                  "replace_instructions")),
    ("The turn loop's policies", ("policies", "first_read", "repeat_asks", "evidence_check",
                                  "allow_first_turn_submit")),
    ("Recursion and checking", ("max_depth", "strict_depth", "max_child_concurrency", "min_confidence",
                                "max_revisions", "verify_timeout", "refine", "rounds")),
    ("Display", ("quiet", "interpolate", "widget_interval", "embed_trajectory")),
)

# the environment variable holding each common provider's key (litellm's names)
PROVIDER_KEYS = {
    "openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY",
    "azure": "AZURE_API_KEY", "groq": "GROQ_API_KEY", "mistral": "MISTRAL_API_KEY", "cohere": "COHERE_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY", "openrouter": "OPENROUTER_API_KEY", "deepseek": "DEEPSEEK_API_KEY",
    "xai": "XAI_API_KEY", "fireworks_ai": "FIREWORKS_AI_API_KEY", "perplexity": "PERPLEXITYAI_API_KEY",
}
NO_KEY = frozenset({"ollama", "ollama_chat", "hosted_vllm", "lm_studio", "llamafile"})


def _value(magics: Any, name: str) -> tuple[str, str]:
    """A setting's shown value and where it comes from."""

    if name in ("model", "sub_model"):
        value = getattr(magics, name)
        env = ENV_MODEL if name == "model" else ENV_SUB_MODEL
        if value:
            return repr(value), "%config"
        if os.environ.get(env):
            return repr(os.environ[env]), f"${env}"
        return ("not set: pass -m" if name == "model" else "the root model"), "default"
    trait = magics.traits()[name]
    value = getattr(magics, name)
    return repr(value), "default" if value == trait.default() else "%config"


def config_report(magics: Any) -> str:
    """The effective settings, grouped by topic, each with where it comes from."""
    names = [n for n in magics.trait_names(config=True) if n not in ("parent", "config", "log")]
    lines = ["%%rlm settings by topic (change with %config RLMMagics.<name> = value; a cell's options override "
             "them for that cell)"]
    placed: set[str] = set()
    topics = list(TOPICS) + [("Other", tuple(n for n in sorted(names) if not any(n in t for _, t in TOPICS)))]
    for title, members in topics:
        present = [n for n in members if n in names or n in ("model", "sub_model")]
        if not present:
            continue
        lines.append(f"{title}:")
        for name in present:
            placed.add(name)
            value, origin = _value(magics, name)
            lines.append(f"  {name:<24} {value}" + ("" if origin == "default" else f"  ({origin})"))
        if title == "Sandbox":
            lines.append(f"  {'confinement active':<24} {magics.confinement_line()}")
    return "\n".join(lines)


def provider_of(name: str) -> str:
    """litellm's provider of a model name: the part before the first '/', else OpenAI's."""
    return name.split("/", 1)[0] if "/" in name else "openai"


def key_status(name: str) -> str:
    """Whether the provider's key is set, by the variable's name; never its value."""
    provider = provider_of(name)
    if provider in NO_KEY:
        return f"{provider}: no key needed"
    env = PROVIDER_KEYS.get(provider)
    if env is None:
        return f"{provider}: key checked on the first run"
    return f"{env} is set" if os.environ.get(env) else f"{env} is NOT set"


def key_source(model: Any) -> str:
    """Where a model's key comes from, never its value: the `api_key=` argument of a model object, no key
    for a server on this machine, else the provider's environment variable (set or not).

    Args:
        model: a litellm model name or a model object (a `LiteLLM` carries `kwargs` and `local`).
    """
    if isinstance(model, str):
        return key_status(model)
    kwargs = getattr(model, "kwargs", None)
    name = getattr(model, "name", None)
    if not isinstance(kwargs, dict) or not isinstance(name, str):
        return "no key needed"  # a scripted or custom model object
    base = kwargs.get("api_base")
    at = f" at {base}" if base else ""
    if kwargs.get("api_key"):
        return f"key from the api_key= argument{at}"
    if provider_of(name) in NO_KEY:
        return f"no key needed ({'server on this machine' if getattr(model, 'local', False) else 'local provider'}{at})"
    status = key_status(name)
    if base and status.endswith("NOT set") and getattr(model, "local", False):
        return f"{status}: {base} is on this machine, pass api_key='none' if it needs none"
    return status + (f" (for {base})" if base else "")


def _describe(value: Any) -> tuple[str, str]:
    """(what the model is, where its key comes from) for a model name or a model object."""
    if isinstance(value, str):
        return value, key_status(value)
    name = getattr(value, "name", type(value).__name__)
    return f"{name} ({type(value).__name__} object)", key_source(value)


def models_report(magics: Any) -> str:
    """The root, sub and child models a cell without -m/-s would use, where each came from, whether its
    provider's key is set; then the models of the last run."""

    rows: list[tuple[str, str, str, str]] = []
    for role, trait, env in (("root", "model", ENV_MODEL), ("sub", "sub_model", ENV_SUB_MODEL)):
        value, origin = getattr(magics, trait), "%config"
        if not value and os.environ.get(env):
            value, origin = os.environ[env], f"${env}"
        if not value:
            rows.append((role, "not set" if role == "root" else "the root model",
                         "pass -m or set %config RLMMagics.model" if role == "root" else "", ""))
            continue
        shown = magics.ip.user_ns.get(value, value) if value.isidentifier() and magics.ip is not None else value
        what, key = _describe(shown)
        rows.append((role, what, origin, key))
    last = getattr(magics, "last", None)
    if last is not None:
        started = next((e for e in last.trajectory.events if e.kind == "run_started"), None)
        if started is not None:
            used = getattr(magics, "last_models", (None, None))
            for (role, name), obj in zip((("root", started.model), ("sub", started.sub_model)), used, strict=True):
                key = key_source(obj) if obj is not None and not isinstance(obj, str) else (
                    key_status(name) if "/" in name else "")
                rows.append((f"{role} (last run)", name, "the last run", key))
    width = max(len(r[1]) for r in rows)
    lines = ["Models of %%rlm (a cell's -m / -s override these; key values are never shown):"]
    for role, what, origin, key in rows:
        extra = "  ".join(x for x in (f"from {origin}" if origin and not origin.startswith("pass") else origin, key)
                          if x)
        lines.append(f"  {role:<16} {what:<{width}}  {extra}".rstrip())
    return "\n".join(lines)
