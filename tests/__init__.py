"""agent_meta's unit, property and actor tests (a package: helpers import as ``tests.NAME``)."""
