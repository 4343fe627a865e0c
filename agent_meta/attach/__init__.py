"""``agent-meta attach``: a stdio ACP agent that is a remote host's client, so that a client
which starts agents on stdio (Zed, acpx, the SDK clients) reaches a host serving ACP over a
WebSocket (``agent-meta agent --runtime sdk --listen``). It carries messages and the bearer
token; it owns nothing (the host does).

- :mod:`._command`: the command line and the two pumps (stdin to the WebSocket, and back).
"""

__all__: list[str] = []
