"""The reference agent on the official ACP Python SDK: ``agent-meta agent --runtime sdk``.

The same prompt-line commands as :mod:`agent_meta.apps.reference_agent`, the same ``--store``
tables, and the same state in a client, on the SDK (``agent-client-protocol`` 0.12, protocol
v1) with :mod:`agent_meta.sdk`'s adapter under it. Its handlers say through the SDK what the SDK
can say (``conn.session_update(sid, SessionInfoUpdate(...))``: the adapter absorbs it) and
through the session's lifetime what it cannot (a cleared ``_meta`` or title, domain edits,
failure incidents). Needs the ``sdk`` extra.
"""

from ._agent import SdkReferenceAgent as SdkReferenceAgent
from ._serve import serve_sdk_agent as serve_sdk_agent

__all__ = ["SdkReferenceAgent", "serve_sdk_agent"]
