"""Deliberately broken ACP agents, each breaking one rule: ``python -m tests.broken_agents.NAME``
(from the repository root)."""
