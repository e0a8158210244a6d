"""The ground floor: settings, the error tree, usage, tokens, JSON values, the sync runner, flags and
model-facing text (prompts/). Knows nothing of a run.
"""

__all__: list[str] = []
