"""The ``agent-meta`` command (and ``python -m agent_meta``): the top-level parser only, in
:mod:`._main`. It holds no command of its own: each subcommand's options and what it runs are
its product's (``own``: :mod:`agent_meta.own`; ``run``: :mod:`agent_meta.instrument`;
``proxy``, ``check``, ``timeline``: :mod:`agent_meta.tools`; ``agent``: :mod:`agent_meta.agents`;
``demo``: :mod:`agent_meta.demo`), each with its ``add_parser``.
"""

__all__: list[str] = []
