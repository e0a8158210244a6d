"""Compaction by summary: before trimmed turns leave the root conversation, the root model summarises them.

With `compaction="summarize"` the loop calls `summarize_dropped` right after `Conversation.trim`
dropped turns. One extra root request (the system prompt, the opening, the dropped turns and the
`compact` prompt) asks for a plain-text summary that keeps variable names, findings and numbers;
it is kept on the conversation and shown in the note that names the dropped turns. A failed or
empty summary leaves plain dropping in place; the run goes on either way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from rlmnb._engine.conversation import Conversation
from rlmnb._ground.errors import RLMError
from rlmnb._ground.prompts import render
from rlmnb._models.base import Message

__all__ = ["SUMMARY_WORDS", "summarize_dropped"]

SUMMARY_WORDS = 300
"""The length the root model is asked to keep one summary under."""


def summary_request(conversation: Conversation, dropped: list[int]) -> list[Message]:
    """The request that asks for a summary of `dropped` turns (the conversation itself is not changed)."""
    out: list[Message] = [{"role": "system", "content": conversation.system}]
    out.extend({"role": "user", "content": text} for text in conversation.opening)
    if conversation.summary:
        out.append({"role": "user", "content": conversation.summary})
    for record in conversation.turns:
        if record.turn in dropped:
            out.append({"role": "assistant", "content": record.reply})
            out.append({"role": "user", "content": record.observation})
    turns = ", ".join(str(t) for t in sorted(dropped))
    out.append({"role": "user", "content": render("compact", turns=turns, words=SUMMARY_WORDS)})
    return out


async def summarize_dropped(conversation: Conversation, dropped: list[int],
                            ask: Callable[[list[Message]], Awaitable[str]]) -> bool:
    """Ask for a summary of the `dropped` turns and keep it on the conversation; True when one was kept.

    Args:
        conversation: the root conversation, already trimmed.
        dropped: the turns the trim just dropped.
        ask: sends one root request and returns the reply text (budget and events are its business).
    """
    if not dropped:
        return False
    try:
        text = (await ask(summary_request(conversation, dropped))).strip()
    except RLMError:  # out of budget, or the model failed: dropping alone still fits the window
        return False
    if not text:
        return False
    conversation.add_summary(text)
    return True
