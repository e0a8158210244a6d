"""The kernel sandbox: a separate IPython kernel process, its supply (warm spare, cold start),
its environment, and the code that runs on the kernel's side.
"""

__all__: list[str] = []
