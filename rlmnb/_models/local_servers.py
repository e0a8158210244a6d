"""Models served on this machine (llama.cpp, Ollama, vLLM, LM Studio): slow, and one request at a time.

A local server on a laptop CPU can take minutes for one long prompt, and many answer one request
at a time: a request that timed out on our side may still be computed, and sending it again would
queue behind it. So for a loopback `api_base` (or a provider whose default address is local) the
request timeout defaults to `LOCAL_TIMEOUT` instead of `REMOTE_TIMEOUT`, and a timed-out request is
not retried (see `LiteLLM.acomplete`).
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

REMOTE_TIMEOUT = 120.0
"""Seconds a request to a hosted provider may take by default."""
LOCAL_TIMEOUT = 600.0
"""Seconds a request to a server on this machine may take by default."""
# providers whose default api_base is on this machine
LOCAL_PROVIDERS = frozenset({"ollama", "ollama_chat", "lm_studio", "llamafile"})


def is_loopback(api_base: object) -> bool:
    """True when `api_base` names this machine (127.0.0.0/8, ::1, localhost, 0.0.0.0)."""
    if not isinstance(api_base, str) or not api_base.strip():
        return False
    text = api_base.strip()
    host = urlsplit(text if "://" in text else f"http://{text}").hostname or ""
    if host in ("localhost", "0.0.0.0") or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_local(model: str, api_base: object) -> bool:
    """A model served on this machine: a loopback api_base, or a local provider with its default address."""
    if api_base is not None and str(api_base).strip():
        return is_loopback(api_base)
    return model.split("/", 1)[0] in LOCAL_PROVIDERS if "/" in model else False

