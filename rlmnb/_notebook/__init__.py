"""The notebook front end: the %%rlm / %rlm magics (options, settings, commands, help, reports),
the live widget and its trace panel.
"""

__all__: list[str] = []
