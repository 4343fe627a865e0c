"""Layer 5, apps: the ``agent-meta`` command line, the demo and the reference agent, built only
on the layers below.
"""

__all__: list[str] = []
