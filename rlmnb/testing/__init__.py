"""Offline test doubles: scripted models, data generators and a fake OpenAI-compatible server."""

from __future__ import annotations

from rlmnb.testing.scripted import ScriptedLM

__all__ = ["ScriptedLM"]
