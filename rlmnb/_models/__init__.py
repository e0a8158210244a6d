"""The model seam: the `LM` protocol and its transports (litellm), reading replies, retry rules,
and picking an implementation for a name.
"""

__all__: list[str] = []
