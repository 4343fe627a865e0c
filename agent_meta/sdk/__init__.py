"""agent_meta for agents built on the official ACP Python SDK (``agent-client-protocol``).

Needs the ``sdk`` extra (``pip install 'agent-meta[sdk]'``; tested with
``agent-client-protocol`` 0.12). Import it explicitly (``import agent_meta.sdk``); ``import
agent_meta`` does not load it. See ``docs/sdk.md`` for the five-line adoption.

- :func:`open_stdio_adapter` (and :func:`open_stream_adapter` for any asyncio stream pair)
  yields an :class:`SdkAdapter`: pass it as ``input_stream`` to ``acp.run_agent``. Its asyncio
  owner becomes the connection's only writer.
- :func:`create_asgi_app` is the SDK's HTTP and WebSocket app with an adapter per connection;
  :func:`adapter_of` finds a connection's adapter.
"""

from ._adapter import AdapterStatistics as AdapterStatistics
from ._adapter import MessageSource as MessageSource
from ._adapter import SdkAdapter as SdkAdapter
from ._remote import adapter_of as adapter_of
from ._remote import create_asgi_app as create_asgi_app
from ._stdio import open_stdio_adapter as open_stdio_adapter
from ._stdio import open_stream_adapter as open_stream_adapter

__all__ = [
    "AdapterStatistics",
    "MessageSource",
    "SdkAdapter",
    "adapter_of",
    "create_asgi_app",
    "open_stdio_adapter",
    "open_stream_adapter",
]
