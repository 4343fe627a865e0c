"""The transport seam: where encoded frames leave the owner, whatever the runtime.

A transport sends one complete frame (one NDJSON line, newline included) per call. How a send
fails tells the owner what it may do next:

- :class:`FrameNotSentError`: the transport *proves* that no byte of the frame was written.
  The owner may retry the same frame (with backoff) and the stream stays usable.
- :class:`FrameLostError`: the frame may or may not have arrived, but frame boundaries are
  intact (a message transport, say). The owner goes on, and repairs the client's view of that
  session with a resync before the session's next frame.
- anything else (including a cancellation in the middle of a write): part of the frame may be
  on the wire, so the byte stream is corrupt. The transport is broken for good and the owner
  stops with :class:`~agent_meta.TransportBrokenError`. A half line is never followed by
  another frame.

The byte-stream transports of each runtime: ``StreamTransport`` (trio,
:mod:`._trio_stream`) and ``AsyncioStreamTransport`` (asyncio,
:mod:`._asyncio_stream`).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["Transport"]


@runtime_checkable
class Transport(Protocol):
    """Sends encoded frames for an owner (either driver). Only the owner calls it.

    ``send_frame`` is awaited in the owner's runtime (trio or asyncio). The owner never closes
    a transport or stream it was given: whoever opened it closes it.
    """

    async def send_frame(self, frame: bytes) -> None:
        """Send one whole frame. Raise as the module docstring describes on failure."""
        ...
