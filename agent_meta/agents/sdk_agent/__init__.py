"""The reference agent on the official ACP Python SDK: ``agent-meta agent --runtime sdk``.

The same prompt-line commands as :mod:`agent_meta.agents.reference_agent`, the same ``--store``
tables, and the same state in a client, on the SDK (``agent-client-protocol`` 0.8 to 1.0) with
:mod:`agent_meta.sdk`'s adapter under it: :class:`SdkReferenceAgent` speaks ACP v1 (the SDK's
``acp`` API), and on the SDK 1.0 ``SdkReferenceAgentV2`` (``._agent_v2``, not imported here:
it needs ``acp.experimental.v2``) speaks ACP v2. Their handlers say through the SDK what the
SDK can say (``conn.session_update(sid, SessionInfoUpdate(...))``: the adapter absorbs it) and
through the session's lifetime what it cannot (domain edits, failure incidents, and on v1 a
cleared ``_meta`` or title). Needs the ``sdk`` extra.
"""

__all__: list[str] = []  # an application: its modules are private
