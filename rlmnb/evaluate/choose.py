"""Picking a method by name: the built-in ones (methods.py) and the peer packages' (peers.py)."""

from __future__ import annotations

from ..errors import ConfigError
from .methods import DirectMethod, Method, RLMMethod
from .peers import peer_method
from .peers_extra import extra_peer

BUILTIN = ("rlm", "rlm_no_sub", "direct")
PEERS = ("rlms", "dspy_rlm", "minrlm", "fast_rlm")
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
    if key in ("minrlm", "fast_rlm"):
        extra: Method = extra_peer(key)
        return extra
    if key in PEERS:
        peer: Method = peer_method(key)
        return peer
    raise ConfigError(f"unknown method {name!r}: choose from {', '.join(METHOD_NAMES)}.")
