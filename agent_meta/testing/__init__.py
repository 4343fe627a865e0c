"""Test helpers for code that embeds agent_meta, and for agent_meta itself.

Import it explicitly (``import agent_meta.testing``); ``import agent_meta`` does not load it.

- :class:`ClientMirror` folds the frames a client received (v1 or v2 rules) into what that
  client holds, independently of agent_meta's own patch code. The client-side tools fold with
  it too, so importing it loads no runtime: the others are imported on first use (PEP 562).
- :class:`RecordingTransport`, :class:`SlowTransport`, :class:`GatedTransport` and
  :class:`FailingTransport` are :class:`agent_meta.Transport` fakes that record what was
  delivered, add backpressure, hold sends until the test releases them, or fail chosen sends
  in each of the ways the transport seam defines.
- :class:`PipeRecorder` is a real OS pipe for the owner to write to (the stdio path, direct
  writes included), read back on demand.
"""

from typing import TYPE_CHECKING, Any

from ._mirror import ClientMirror as ClientMirror
from ._mirror import MirrorError as MirrorError

if TYPE_CHECKING:
    from ._pipe import PipeRecorder as PipeRecorder
    from ._transports import FailingTransport as FailingTransport
    from ._transports import FailMode as FailMode
    from ._transports import GatedTransport as GatedTransport
    from ._transports import RecordingTransport as RecordingTransport
    from ._transports import SlowTransport as SlowTransport

__all__ = [
    "ClientMirror",
    "FailMode",
    "FailingTransport",
    "GatedTransport",
    "MirrorError",
    "PipeRecorder",
    "RecordingTransport",
    "SlowTransport",
]

_LAZY = {
    "PipeRecorder": "._pipe",
    "FailingTransport": "._transports",
    "FailMode": "._transports",
    "GatedTransport": "._transports",
    "RecordingTransport": "._transports",
    "SlowTransport": "._transports",
}
"""The fakes, by module: they load trio and asyncio, which the mirror's users need not."""


def __getattr__(name: str) -> Any:
    from importlib import import_module

    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value
