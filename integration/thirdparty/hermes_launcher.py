"""hermes-agent 0.19.0's ACP adapter with agent_meta under it: the five-line adoption.

hermes' own start (``acp_adapter/entry.py``, ``main``) sets up logging and its environment,
discovers MCP tools, builds ``HermesACPAgent()`` and ends in
``asyncio.run(acp.run_agent(agent, use_unstable_protocol=True))``. This launcher runs the same
start-up (:func:`start`, with hermes' own helpers; ``_setup_logging`` and ``_load_env`` are
private to ``entry.py``, so a change in hermes may break this file) and the glue of
``docs/sdk.md`` ("Five lines"), marked ``glue``; hermes-agent itself is unchanged. It runs in
hermes' venv (SDK 0.9.0, Python 3.11).
"""

import asyncio
import contextlib
import logging
import sys
from pathlib import Path
from typing import Any

import acp
from acp_adapter import entry  # type: ignore[import-not-found]

from agent_meta.sdk import open_stdio_adapter  # glue 1/5
from integration.thirdparty.meta_control import attach  # the test's control channel, not glue


async def main(agent: Any) -> None:  # glue 2/5
    async with open_stdio_adapter() as meta:  # glue 3/5
        attach(meta)  # not glue: the test's control channel (integration/thirdparty/control.py)
        await acp.run_agent(agent, **meta.connection_kwargs(), use_unstable_protocol=True)
        # glue 4/5: the line above was `asyncio.run(acp.run_agent(agent, ...))`


def start() -> Any:
    """``entry.main()`` up to the agent, as hermes does it."""
    entry._setup_logging()
    entry._load_env()
    logging.getLogger(entry.__name__).info("Starting hermes-agent ACP adapter (agent_meta glue)")
    project_root = str(Path(entry.__file__).resolve().parent.parent)
    if project_root not in sys.path:
        sys.path.insert(0, project_root)
    from acp_adapter.server import HermesACPAgent  # type: ignore[import-not-found]

    with contextlib.suppress(Exception):  # as hermes: MCP discovery failing is not fatal
        from tools.mcp_tool import discover_mcp_tools  # type: ignore[import-not-found]

        discover_mcp_tools()
    return HermesACPAgent()


if __name__ == "__main__":
    asyncio.run(main(start()))  # glue 5/5
