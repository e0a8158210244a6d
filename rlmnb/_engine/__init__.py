"""The engine of one run tree: runs, the turn loop, one turn, replies, the conversation, sub-calls, the
budget, limits, cache, verification and replay.
"""

__all__: list[str] = []
