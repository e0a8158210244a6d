"""Every limit and default of a run, in one frozen record.

`RLM(...)` keyword arguments, the magic's options and `%config RLMMagics` all end up here, so the
meaning of a setting is written down once. `RLMConfig.validate()` turns bad values into one clear
`ConfigError` before any model call.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from rlmnb._ground.errors import ConfigError

__all__ = ["CONFINEMENTS", "POLICIES", "PROFILES", "SANDBOXES", "RLMConfig", "field_names", "parse_size"]

SANDBOXES = ("local", "kernel")
CONFINEMENTS = ("auto", "required", "off")
COMPACTIONS = ("drop", "summarize")
FIRST_READS = ("auto", "on", "off")
POLICIES = ("empty_reply", "repeat_breaker", "look_first", "unshown_value", "whole_copy", "prose_answer", "same_error",
            "guess_note", "first_read", "final_answer")
"""Every turn-loop policy, in the order they act (rlmnb/_engine/policies: one module each)."""
PROFILES: dict[str, tuple[str, ...]] = {
    "paper": ("final_answer",),
    "default": ("prose_answer", "final_answer"),
    "small": ("prose_answer", "final_answer", "first_read"),  # acting order is POLICIES'
}
"""Named sets of policies: "paper" is the loop as the RLM paper describes it (code, outputs, submit; one final
call when the turns run out); "default" adds the policies that earned their place in the ablation
(docs/decisions/policies.md#ablation); "small" adds a first reading for small root models; "auto" (not listed) is
"small" for a root model whose context window is at most 32,768 tokens, else "default"; "all" (not listed) is every
policy. The other policies run only when named."""
_EXAMPLES = {"allow_paths": "['/data', '/scratch:rw']", "allow_network": "['127.0.0.1:8786']",
             "models": "['openai/gpt-4o-mini']"}


@dataclass(frozen=True)
class RLMConfig:
    """Limits and defaults of one run. Field docs are the user-facing help text."""

    max_iterations: int = 20
    """Root turns before the run falls back to a final synthesis call."""
    max_llm_calls: int = 50
    """Sub-model calls (llm_query and every slot of llm_query_batched) for the whole run tree."""
    max_tokens: int | None = None
    """Input plus output tokens across every model call of the run tree; None for no cap."""
    max_cost: float | None = None
    """US dollars across every priced model call of the run tree; None for no cap."""
    max_time: float | None = None
    """Wall-clock seconds for the whole run; None for no cap."""
    timeout: float = 60.0
    """Seconds one code snippet may run before it is interrupted; with a sub-model on this machine, at least
    one sub-call's request timeout."""
    max_concurrency: int = 64
    """Sub-calls in flight at once in a run and all its child runs together (adapts down on rate limits)."""
    min_concurrency: int = 2
    """The floor the adaptive concurrency limit never goes below."""
    max_output_chars: int = 10_000
    """Characters of a snippet's output shown to the root model (head and tail kept); lowered to fit a
    small root model's context window."""
    max_context_tokens: int = 100_000
    """Root conversation size above which the lowest-value middle turns are dropped; lowered to what the
    root model's context window holds with room for its reply."""
    compaction: str = "drop"
    """What happens to the middle turns when the root conversation outgrows max_context_tokens: 'drop' (they
    are left out, with a note naming them) or 'summarize' (the root model first writes a summary of them
    that keeps variable names, findings and numbers; one extra root call per compaction)."""
    max_sub_prompt_tokens: int | None = None
    """Largest sub-call prompt; None means the sub-model's context window when litellm knows it."""
    summary_max_tokens: int = 1_000
    """Token cap of the rendered InputsSummary, whatever the input size."""
    preview_chars: int = 240
    """Characters of head (and of tail) shown per text input; 0 turns text previews off."""
    preview_rows: int = 3
    """Rows shown per table input; 0 turns table previews off."""
    max_columns_shown: int = 24
    """Columns listed per table before '... N more'."""
    allow_first_turn_submit: bool = False
    """Accept submit() on the first turn, before the model has seen any output."""
    evidence_check: bool = True
    """Allow the policies that judge a submitted answer against what the run showed: `unshown_value` (a number or
    id the model typed that nothing showed goes back once) and `whole_copy` (an answer that is most of a text input
    goes back once). They are in no profile, so they run only when named in `policies`; False removes them even
    then."""
    repeat_asks: int = 2
    """Times per run the root is asked for another step when its reply would run an earlier turn's code again (or
    say its earlier long prose again); the repeat is not run. The run's next repeat ends the turns, and the
    fallback answers from what the code printed (0: the first repeat does)."""
    policies: str | tuple[str, ...] = "auto"
    """The turn loop's policies: a profile ("auto", "default", "small", "paper"), "all" (every policy) or policy
    names, as a list or one string with commas, from empty_reply, repeat_breaker, look_first, unshown_value,
    whole_copy, prose_answer, same_error, guess_note, first_read, final_answer. Each watches one thing and may add a
    note, send a submitted answer back once, ask the model again, take a reply as the answer or end the turns; the
    trajectory says which acted. The profiles hold those that earned their place on tasks they were not made from;
    the others run only when named (docs/decisions/policies.md). Validation turns names into a tuple."""
    first_read: str = "auto"
    """Policy `first_read`: before the root's first step, the sub-model reads the text inputs with the question (at
    most 4 sub-calls, each text cut to fit its window) and the root sees its answers as evidence: 'on' adds it,
    'off' removes it, 'auto' leaves it to `policies` (profile "small", which "auto" picks for a root model whose
    context window is 32,768 tokens or less)."""
    sandbox: str = "kernel"
    """'kernel' (a separate IPython kernel process: hard timeouts, memory cap, no secrets) or 'local'
    (a namespace in this process: faster, but not a boundary against the code the model writes)."""
    memory_limit: int | str | None = None
    """Data-memory cap of a kernel sandbox: bytes, or a size such as "2GB" or "512MiB"; None for no cap."""
    cache: bool = True
    """Serve identical sub-model requests from the on-disk response cache."""
    max_retries: int = 4
    """Retries of a model call on 429, 5xx, connection errors and timeouts."""
    request_timeout: float | None = None
    """Seconds one model request may take; None: 120, or 600 for a server on this machine (loopback api_base),
    where a request that timed out is also never retried."""
    max_event_chars: int = 20_000
    """Characters of a sub-call prompt kept in the trajectory (its length and hash are always kept)."""
    max_depth: int = 1
    """Depth at which rlm_query stops starting child runs (1: rlm_query is a plain sub-call)."""
    strict_depth: bool = False
    """At the depth cap, fail rlm_query with DepthLimitReached instead of making a plain sub-call."""
    max_child_concurrency: int = 4
    """Child runs of one rlm_query_batched running at once."""
    min_confidence: float = 0.7
    """Confidence a verify guard must give an answer for it to be accepted."""
    max_revisions: int = 3
    """Revisions after a low verify score; the run ends within max_revisions + 1 attempts."""
    verify_timeout: float = 60.0
    """Seconds a verify guard may take before its attempt counts as confidence 0."""
    refine: int | None = None
    """Refinement depth: an answer at depth d < refine becomes the input `draft` of a child run."""
    rounds: int = 1
    """Passes of the root run, each with the earlier passes' answers bound as `earlier`."""
    instructions: str | None = None
    """Extra instructions appended to the system rules."""
    replace_instructions: bool = False
    """Use `instructions` instead of the built-in rules rather than after them."""
    secret_env: tuple[str, ...] = ()
    """Extra environment variable names kept out of a kernel sandbox."""
    pack_tokens: int | None = None
    """Token target of one packed llm_map/llm_classify/llm_filter prompt; None: a quarter of the sub-model's
    window (at most 8,000), or 4,000 when the window is unknown."""
    pack_items: int | None = None
    """Most items packed into one llm_map sub-call; None: 50, or 1 for a sub-model whose context window is known
    and at most 32,768 tokens (a small model: packing cost it accuracy and calls, see bench/packing.py)."""
    map_retries: int = 2
    """Times an llm_map item whose answer is missing or invalid is re-asked on its own before it is None."""
    confinement: str = "auto"
    """Kernel sandbox confinement (Linux Landlock + seccomp): 'auto' (as far as the system can, saying every run
    what is not enforced), 'required' (refuse to run unless every guard holds) or 'off'."""
    allow_paths: tuple[str, ...] = ()
    """More paths a confined kernel sandbox may read ('/data' or '/data:ro'), or read and write ('/out:rw')."""
    allow_network: tuple[str, ...] = ()
    """More 'host:port' addresses a confined kernel sandbox may connect to (TCP; Landlock rules by port)."""
    allow_model_code_on_dask_cluster: bool = False
    """Let a Dask input bound to a distributed cluster be computed ON that cluster: the kernel sandbox connects to
    its scheduler, so model code runs on the cluster's scheduler and workers, outside rlmnb's confinement (with a
    LocalCluster: in this very process). False: the sandbox computes Dask frames itself, and the host computes a
    frame whose data only the cluster holds and copies the result in."""
    models: tuple[str, ...] = ()
    """More models, by litellm name, that llm_query(model=...), llm_query_batched and llm_map may call besides the
    run's own (model, sub_model, child_model); any other name is refused to the model with nothing sent."""
    journal: bool | str = True
    """Write the run's events to a journal file as they happen (what resume reads): True for $RLMNB_JOURNAL_DIR
    or .rlmnb/runs under the working directory, a folder path, or False for none."""
    journal_keep: int = 50
    """Journals kept in the journal folder; the oldest beyond this are deleted when a run starts."""

    def validate(self) -> RLMConfig:
        positive_ints = ("max_iterations", "max_concurrency", "min_concurrency", "max_output_chars",
                         "max_context_tokens", "summary_max_tokens", "max_columns_shown", "max_event_chars",
                         "max_child_concurrency", "rounds", "journal_keep")
        for name in positive_ints:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"{name} must be a positive whole number, got {value!r}.")
        for name in ("max_llm_calls", "preview_chars", "preview_rows", "max_retries", "max_depth", "max_revisions",
                     "map_retries", "repeat_asks"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{name} must be a whole number of 0 or more, got {value!r}.")
        parse_size(self.memory_limit, "memory_limit")
        for name in ("max_tokens", "max_sub_prompt_tokens", "refine", "pack_tokens", "pack_items"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
                raise ConfigError(f"{name} must be a positive whole number or None, got {value!r}.")
        if not (isinstance(self.min_confidence, int | float) and 0.0 <= self.min_confidence <= 1.0):
            raise ConfigError(f"min_confidence must be between 0 and 1, got {self.min_confidence!r}.")
        for name in ("timeout", "verify_timeout"):
            value = getattr(self, name)
            if not _positive_number(value):
                raise ConfigError(f"{name} must be a positive number of seconds, got {value!r}.")
        for name in ("max_cost", "max_time", "request_timeout"):
            value = getattr(self, name)
            if value is not None and not _positive_number(value):
                raise ConfigError(f"{name} must be a positive number or None, got {value!r}.")
        if self.sandbox not in SANDBOXES:
            raise ConfigError(f"sandbox must be one of {', '.join(SANDBOXES)}, got {self.sandbox!r}.")
        if self.confinement not in CONFINEMENTS:
            raise ConfigError(f"confinement must be one of {', '.join(CONFINEMENTS)}, got {self.confinement!r}.")
        if not isinstance(self.allow_model_code_on_dask_cluster, bool):
            raise ConfigError(f"allow_model_code_on_dask_cluster must be True or False, "
                              f"got {self.allow_model_code_on_dask_cluster!r}.")
        for name in ("allow_paths", "allow_network", "models"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(v, str) and v for v in value):
                raise ConfigError(f"{name} must be a list of strings such as {_EXAMPLES[name]}, got {value!r}.")
            object.__setattr__(self, name, tuple(value))  # a list from the API or %config, kept as a tuple
        if isinstance(self.policies, str) and self.policies not in ("auto", "all", *PROFILES):
            object.__setattr__(self, "policies", tuple(n.strip() for n in self.policies.split(",") if n.strip()))
        if not isinstance(self.policies, str):  # a list of names, from the API or "a,b" from the CLI or %config
            names = tuple(self.policies) if isinstance(self.policies, list | tuple) else None
            unknown = [n for n in names or () if n not in POLICIES]
            if not names or unknown or not all(isinstance(n, str) for n in names):
                raise ConfigError(f"policies must be a profile ({', '.join(['auto', *PROFILES])}), 'all', or policy "
                                  f"names from {', '.join(POLICIES)}; "
                                  f"{'unknown: ' + ', '.join(map(repr, unknown)) if unknown else f'got {self.policies!r}'}.")
            object.__setattr__(self, "policies", names)
        if self.first_read not in FIRST_READS:
            raise ConfigError(f"first_read must be one of {', '.join(FIRST_READS)}, got {self.first_read!r}.")
        if self.compaction not in COMPACTIONS:
            raise ConfigError(f"compaction must be one of {', '.join(COMPACTIONS)}, got {self.compaction!r}.")
        if not isinstance(self.journal, bool | str) or self.journal == "":
            raise ConfigError(f"journal must be True, False or a folder path, got {self.journal!r}.")
        if self.min_concurrency > self.max_concurrency:
            raise ConfigError("min_concurrency must not exceed max_concurrency.")
        return self

    def replace(self, **changes: Any) -> RLMConfig:
        return dataclasses.replace(self, **changes).validate()

    def public_dict(self) -> dict[str, Any]:
        """The settings as recorded in a trajectory (no secrets live here by construction)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["secret_env"] = list(self.secret_env)
        out["allow_paths"] = list(self.allow_paths)
        out["allow_network"] = list(self.allow_network)
        out["models"] = list(self.models)
        if not isinstance(self.policies, str):
            out["policies"] = list(self.policies)
        return out


_SIZE_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
               "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_size(value: object, setting: str) -> int | None:
    """Bytes from 2_000_000_000, "2GB", "1.5 GiB" or "500M"; None stays None; anything else is a ConfigError."""
    import re

    if value is None:
        return None
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", value) if isinstance(value, str) else None
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        number, unit = float(value), ""
    elif match is not None:
        number, unit = float(match.group(1)), match.group(2).lower()
    else:
        raise ConfigError(f"{setting} must be a number of bytes or a size such as '2GB', got {value!r}.")
    if unit not in _SIZE_UNITS:
        raise ConfigError(f"{setting}: unknown unit in {value!r}; use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB.")
    size = int(number * _SIZE_UNITS[unit])
    if size <= 0:
        raise ConfigError(f"{setting} must be a positive size, got {value!r}.")
    return size


def field_names() -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(RLMConfig))


def _positive_number(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)

