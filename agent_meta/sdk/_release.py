"""Which release of the official SDK is installed, and where agent_meta plugs into it.

The SDK's connection changed shape between releases, and the adapter needs two things from
it: to be the only writer, and to know which handler sent a message (a ``session/load``
handler's updates are replay, not live state). Each release offers them at a different seam:

========== ======================== ===========================================================
release    writing                  starting request handlers
========== ======================== ===========================================================
0.6 - 0.11 ``sender_factory`` over  from one dispatcher task (``dispatcher_factory``): a
           asyncio streams only     context variable set as a message is read never reaches
                                    the handler, so the adapter marks it in the dispatcher
0.12.0     message transport        dispatcher task, as above
           (``input_stream=``)
0.12.1-1.0 message transport        from the receive loop: the mark set as a message is read
                                    reaches the handler
========== ======================== ===========================================================

The connection itself is the same from 0.6 to 0.11; the API around it is not. 0.6 has no
``run_agent``: agents build ``AgentSideConnection(factory, writer, reader)``, whose constructor
starts reading, and keep their loop alive themselves (its handlers are camelCase:
``newSession``, ``sessionUpdate``). Its schema, and 0.7.0's, has no ``SessionInfoUpdate``, so an
agent there publishes only through the adapter's lifetime handle. ``session/close`` reaches the
agent from 0.9 on. From 1.0 on, the connection answers
``$/cancel_request`` itself, and ``acp.experimental.v2`` serves ACP v2 (alone, or next to a v1
agent behind ``acp.experimental.negotiation.AgentProtocolRouter``) over the same message
transport. Each seam is found by looking at the
installed code (the connection's parameters), not by comparing version numbers; the version
bounds only say what has been tested.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import importlib.util
import inspect
import pathlib
import re
from typing import Final, final

from ..core._errors import AgentMetaError

__all__ = [
    "SUPPORTED_SDK_RANGE",
    "SdkRelease",
    "UnsupportedSdkError",
    "check_version",
    "installed_release",
]

SUPPORTED_SDK_RANGE: Final = ">=0.6.0,<1.1"
"""The ``agent-client-protocol`` releases the adapter is tested with (every 0.6 to 1.0.x)."""

_LOWEST: Final = (0, 6)
_BEYOND: Final = (1, 1)
_VERSION = re.compile(r"(\d+)\.(\d+)")


class UnsupportedSdkError(AgentMetaError, ImportError):
    """The installed ``agent-client-protocol`` is not a release the adapter supports."""


@final
@dataclasses.dataclass(frozen=True, slots=True)
class SdkRelease:
    """What one installed SDK release offers the adapter."""

    version: str
    """The distribution's version, as installed (``0.9.0``, ``1.0.0rc3``)."""
    message_transport: bool
    """``AgentSideConnection`` takes a message transport as ``input_stream`` (0.12 on);
    before, only an asyncio ``StreamWriter`` / ``StreamReader`` pair, written through the
    connection's ``sender_factory``."""
    dispatcher: bool
    """Request handlers are started by a dispatcher task the connection builds with
    ``dispatcher_factory`` (0.6 to 0.12.0)."""
    routes_close: bool
    """``session/close`` reaches the agent (0.9 on); before, nothing is closed, so nothing is
    fenced."""
    cancels_requests: bool = False
    """The connection answers ``$/cancel_request`` itself, cancelling the request's handler
    (1.0.0rc3 on; rc2 names it but ignores it); before, the adapter turns one for a running
    prompt into ``session/cancel``."""
    v2: bool = False
    """``acp.experimental.v2`` and ``acp.experimental.negotiation`` exist (1.0 on): ACP v2
    agents, and one agent per version behind ``AgentProtocolRouter``."""
    runs_agent: bool = True
    """``acp.run_agent`` exists (0.7 on). Before, agents build
    ``AgentSideConnection(factory, writer, reader)`` themselves; :func:`agent_meta.sdk.run_agent`
    then builds it the same way and returns once the SDK has been handed the end of the input."""
    session_info: bool = True
    """``acp.schema`` has ``SessionInfoUpdate`` (0.7.1 on). Before, the agent cannot send a
    ``session_info_update`` through the SDK; the adapter's lifetime handle still publishes."""

    @property
    def seam(self) -> str:
        """``"message transport"`` or ``"streams"``: where the adapter sits (for messages)."""
        return "message transport" if self.message_transport else "streams"


def check_version(version: str) -> None:
    """Raise :class:`UnsupportedSdkError` for a version outside :data:`SUPPORTED_SDK_RANGE`."""
    found = _VERSION.match(version)
    numbers = (int(found.group(1)), int(found.group(2))) if found else None
    if numbers is None or not _LOWEST <= numbers < _BEYOND:
        raise UnsupportedSdkError(
            f"agent-client-protocol {version} is not supported by agent_meta "
            f"(supported: {SUPPORTED_SDK_RANGE})"
        )


@functools.cache
def installed_release() -> SdkRelease:
    """The installed SDK release (looked up once). Raises :class:`UnsupportedSdkError` when
    the SDK is missing or outside :data:`SUPPORTED_SDK_RANGE`."""
    try:
        version = importlib.metadata.version("agent-client-protocol")
    except importlib.metadata.PackageNotFoundError as exc:
        from .._install_hint import install_hint

        raise UnsupportedSdkError(
            f"the official ACP SDK is not installed: {install_hint('sdk')}"
        ) from exc
    check_version(version)
    try:
        from acp import core, meta, schema
        from acp.connection import Connection
        from acp.exceptions import RequestError
    except ImportError as exc:
        raise UnsupportedSdkError(f"agent-client-protocol {version} cannot be imported") from exc
    # Each seam is found in the installed code, not from the version number.
    return SdkRelease(
        version=version,
        message_transport=importlib.util.find_spec("acp._transport") is not None,
        dispatcher="dispatcher_factory" in inspect.signature(Connection.__init__).parameters,
        routes_close="session_close" in getattr(meta, "AGENT_METHODS", {}),
        # 1.0.0rc2 names $/cancel_request but its connection ignores it; the connection that
        # answers it came with RequestError.request_cancelled (rc3).
        cancels_requests="cancel_request" in getattr(meta, "PROTOCOL_METHODS", {})
        and hasattr(RequestError, "request_cancelled"),
        v2=_has_module("acp.experimental", "negotiation"),
        runs_agent=hasattr(core, "run_agent"),
        session_info=hasattr(schema, "SessionInfoUpdate"),
    )


def _has_module(package: str, name: str) -> bool:
    """Whether ``package.name`` is installed, without importing ``package``: finding a
    submodule's spec imports its package, and the SDK 1.0's ``acp.experimental`` imports the
    whole v2 schema (about half a second) that a v1 agent never needs."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.submodule_search_locations is None:
        return False
    for location in spec.submodule_search_locations:
        folder = pathlib.Path(location)
        if (folder / f"{name}.py").is_file() or (folder / name / "__init__.py").is_file():
            return True
    return False
