"""The notebook front end: the %%rlm / %rlm magics (magic; options and their help; settings and their
reports; line commands), the live widget and its trace panel.
"""

__all__: list[str] = []
