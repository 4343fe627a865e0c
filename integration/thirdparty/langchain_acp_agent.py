"""langchain-acp 1.10.0 as its users start it: a LangChain agent graph served by ``run_acp``.

langchain-acp has no command of its own; its users write this script. The model is
langchain-core's ``GenericFakeChatModel`` (offline, no key), answering every call with the same
message. It runs in langchain-acp's venv (SDK 0.12.1, Python 3.12); nothing of agent_meta is
imported here.
"""

import itertools

from langchain.agents import create_agent  # type: ignore[import-not-found]
from langchain_acp import run_acp  # type: ignore[import-not-found]
from langchain_core.language_models.fake_chat_models import (  # type: ignore[import-not-found]
    GenericFakeChatModel,
)
from langchain_core.messages import AIMessage  # type: ignore[import-not-found]

if __name__ == "__main__":
    replies = itertools.cycle([AIMessage(content="echo from the fake model")])
    run_acp(graph=create_agent(model=GenericFakeChatModel(messages=replies), tools=[]))
