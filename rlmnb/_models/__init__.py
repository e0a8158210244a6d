"""The model seam: the `LM` protocol and `Completion` (base), the litellm transport and reading its replies
(litellm), how a request is timed out and retried (request_policy), and picking an implementation for a
name and releasing its clients (resolve).
"""

__all__: list[str] = []
