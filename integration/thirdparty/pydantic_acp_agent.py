"""pydantic-acp 1.10.0 as its users start it: a pydantic-ai agent served by ``run_acp``.

pydantic-acp has no command of its own; its users write this script. The model is pydantic-ai's
``TestModel`` (offline, no key). The ``ThinkingBridge`` is one of pydantic-acp's own capability
bridges: it keeps a session-local setting in the session's metadata, which pydantic-acp sends
as ``_meta.pydantic_acp`` in its ``session_info_update``s (in the ``session/new`` handler,
after each prompt, and as its current info on ``session/load``). It runs in pydantic-acp's venv
(SDK 0.12.1, Python 3.12); nothing of agent_meta is imported here.
"""

from pydantic_acp import AdapterConfig, run_acp  # type: ignore[import-not-found]
from pydantic_acp.bridges.thinking import ThinkingBridge  # type: ignore[import-not-found]
from pydantic_ai import Agent  # type: ignore[import-not-found]
from pydantic_ai.models.test import TestModel  # type: ignore[import-not-found]

if __name__ == "__main__":
    run_acp(
        agent=Agent(TestModel(custom_output_text="echo from TestModel"), name="thirdparty"),
        config=AdapterConfig(capability_bridges=[ThinkingBridge()]),
    )
