"""The base agent unbroken: ``agent-meta check`` must pass it on v1 and v2."""

from tests.broken_agents._base import Agent, main

if __name__ == "__main__":
    main(Agent())
