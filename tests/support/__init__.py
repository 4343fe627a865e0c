"""What the tests share with ``integration/`` and ``bench/``, which import it from here (``tests/``
imports nothing of either): the official-SDK mini agents (``sdk_mini_agent``,
``sdk06_mini_agent``, ``sdk_v2_mini_agent``, each also run as ``python -m
tests.support.<name>``), the throwaway PostgreSQL server with its pytest fixtures
(``postgres_server``, ``postgres_fixtures``), and ``agent-meta`` with a store that crashes the
process after its Nth write (``crash_after_persist``, run as ``python -m
tests.support.crash_after_persist N agent ...``)."""
