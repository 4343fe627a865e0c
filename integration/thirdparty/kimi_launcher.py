"""kimi-cli 1.52.0's ACP server with agent_meta under it: the five-line adoption.

kimi's own start (``kimi_cli/acp/__init__.py``, ``acp_main``) is::

    enable_logging()
    logger.info("Starting ACP server on stdio")
    asyncio.run(acp.run_agent(ACPServer(), use_unstable_protocol=True))

This launcher is that function with the glue of ``docs/sdk.md`` ("Five lines"), marked
``glue``; kimi-cli itself is unchanged. It runs in kimi's venv (SDK 0.8.0, Python 3.13).
"""

import asyncio

import acp
from kimi_cli.acp.server import ACPServer  # type: ignore[import-not-found]
from kimi_cli.app import enable_logging  # type: ignore[import-not-found]
from kimi_cli.utils.logging import logger  # type: ignore[import-not-found]

from agent_meta.sdk import open_stdio_adapter  # glue 1/5
from integration.thirdparty.meta_control import attach  # the test's control channel, not glue


async def main() -> None:  # glue 2/5
    async with open_stdio_adapter() as meta:  # glue 3/5
        attach(meta)  # not glue: the test's control channel (integration/thirdparty/control.py)
        await acp.run_agent(ACPServer(), **meta.connection_kwargs(), use_unstable_protocol=True)
        # glue 4/5: the line above was `asyncio.run(acp.run_agent(ACPServer(), ...))`


if __name__ == "__main__":
    enable_logging()
    logger.info("Starting ACP server on stdio")
    asyncio.run(main())  # glue 5/5
