"""The ``agent-meta`` command (and ``python -m agent_meta``): one entry point that hands each
subcommand to its product (``agent`` and ``demo``, ``proxy``, ``check``, ``timeline``, ``run``).
"""

__all__: list[str] = []
