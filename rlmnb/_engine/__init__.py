"""The engine of one run tree: runs, the turn loop, replies, observations, the conversation,
sub-calls, the budget, limits, cache, verification and replay.
"""
