"""Picking a method by name: the built-in ones (methods.py) and the peer packages' (peers.py)."""

from __future__ import annotations

from rlmnb._eval.methods import DirectMethod, Method, RLMMethod
from rlmnb._eval.peers import peer_method
from rlmnb._ground.errors import ConfigError

BUILTIN = ("rlm", "rlm_no_sub", "direct")
PEERS = ("rlms", "dspy_rlm")
METHOD_NAMES = BUILTIN + PEERS


def get_method(name: str) -> Method:
    """The method called `name`; ConfigError listing the names otherwise (peers check their package)."""
    key = name.strip().lower().replace("-", "_").replace(".", "_")
    if key == "rlm":
        return RLMMethod("rlm")
    if key == "rlm_no_sub":
        return RLMMethod("rlm_no_sub", sub_calls=False)
    if key == "direct":
        return DirectMethod()
    if key in PEERS:
        peer: Method = peer_method(key)
        return peer
    raise ConfigError(f"unknown method {name!r}: choose from {', '.join(METHOD_NAMES)}.")
