"""agent_meta for agents built on the official ACP Python SDK (``agent-client-protocol``).

Needs the ``sdk`` extra (``pip install '/path/to/agent_meta[sdk]'``, README "Install"; every
SDK release from 0.6 to
1.0, see :data:`SUPPORTED_SDK_RANGE`). Import it explicitly (``import agent_meta.sdk``);
``import agent_meta`` does not load it. See ``docs/sdk.md`` for adopting it.

- :func:`run_agent` is ``acp.run_agent`` with an adapter under the connection: the one-line
  adoption (``agent-meta run -- AGENT_CMD`` puts it in place without editing the agent);
  :func:`run_v2_agent` and :func:`serve_router` do the same for the SDK 1.0's
  ``acp.experimental.v2.run_agent`` and ``AgentProtocolRouter.run`` (ACP v2);
  :func:`adapter_of` finds a connection's adapter.
- :func:`open_stdio_adapter` (and :func:`open_stream_adapter` for any asyncio stream pair)
  yields an :class:`SdkAdapter` whose asyncio owner becomes the connection's only writer:
  ``acp.run_agent(agent, **adapter.connection_kwargs())``.
- :func:`create_asgi_app` is the SDK's HTTP and WebSocket app with an adapter per connection
  (SDK 0.12 with its ``http`` extra; imported on first use).
"""

from typing import TYPE_CHECKING, Any

from ._adapter import AdapterStatistics as AdapterStatistics
from ._adapter import SdkAdapter as SdkAdapter
from ._release import SUPPORTED_SDK_RANGE as SUPPORTED_SDK_RANGE
from ._release import UnsupportedSdkError as UnsupportedSdkError
from ._run import adapter_of as adapter_of
from ._run import on_connection as on_connection
from ._run import run_agent as run_agent
from ._run import run_v2_agent as run_v2_agent
from ._run import serve_router as serve_router
from ._stdio import open_stdio_adapter as open_stdio_adapter
from ._stdio import open_stream_adapter as open_stream_adapter

if TYPE_CHECKING:
    from ._remote import create_asgi_app as create_asgi_app

__all__ = [
    "SUPPORTED_SDK_RANGE",
    "AdapterStatistics",
    "SdkAdapter",
    "UnsupportedSdkError",
    "adapter_of",
    "create_asgi_app",
    "on_connection",
    "open_stdio_adapter",
    "open_stream_adapter",
    "run_agent",
    "run_v2_agent",
    "serve_router",
]


def __getattr__(name: str) -> Any:
    # The HTTP server part needs the SDK's http extra and a release that has it: loaded when
    # first asked for, so that the rest of the adapter imports on every release.
    if name == "create_asgi_app":
        try:
            from ._remote import create_asgi_app
        except ImportError as exc:
            from .._install_hint import install_hint

            raise UnsupportedSdkError(
                "agent_meta.sdk.create_asgi_app needs the SDK's HTTP server: "
                "agent-client-protocol 0.12 with its http extra "
                f"({install_hint('sdk-http')}): {exc}"
            ) from exc
        return create_asgi_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
