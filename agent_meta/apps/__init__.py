"""Layer 5, apps: the ``agent-meta`` command line (the reference agent, the demo, and the
``proxy``, ``check`` and ``timeline`` tools that see any ACP agent from the client's side),
built only on the layers below.
"""

__all__: list[str] = []
