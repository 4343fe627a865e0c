"""The ACP wire: pydantic models of ``session_info_update`` and JSON-RPC, and the decoder.

This is agent_meta's counterpart of ``acp.schema``: import it explicitly (``import
agent_meta.wire``; it loads pydantic, ``import agent_meta`` does not). ``_meta: null`` and an
omitted ``_meta`` stay distinct through every model here (see ``docs/wire.md``).

- :class:`SessionInfoUpdate` (ACP v2) and :class:`SessionInfoUpdateV1`: the update with exact
  three-state fields, and :func:`patch_from_update`, the pure core's
  :class:`~agent_meta.SessionInfoPatch` it stands for.
- :func:`decode`: the one decoder, a line into a JSON-RPC message (:class:`JsonRpcRequest`,
  :class:`JsonRpcNotification`, :class:`JsonRpcSuccessResponse`,
  :class:`JsonRpcErrorResponse`) or a batch; :class:`MessageDecodeError` carries the
  :class:`~agent_meta.ErrorCode` to answer. :func:`encode_frame`: one model as one NDJSON line.
- :func:`replay_of`: whether a ``session/load`` or ``session/resume`` asks for replay
  (:class:`Replay`), which every agent that keeps history must decide the same way.
"""

from ..core._replay import Replay as Replay
from ..core._replay import replay_of as replay_of
from ._convert import patch_from_update as patch_from_update
from ._decode import MessageDecodeError as MessageDecodeError
from ._decode import decode as decode
from ._models import JsonRpcErrorResponse as JsonRpcErrorResponse
from ._models import JsonRpcNotification as JsonRpcNotification
from ._models import JsonRpcRequest as JsonRpcRequest
from ._models import JsonRpcSuccessResponse as JsonRpcSuccessResponse
from ._models import SessionInfoUpdate as SessionInfoUpdate
from ._models import SessionInfoUpdateV1 as SessionInfoUpdateV1
from ._models import encode_frame as encode_frame

__all__ = [
    "JsonRpcErrorResponse",
    "JsonRpcNotification",
    "JsonRpcRequest",
    "JsonRpcSuccessResponse",
    "MessageDecodeError",
    "Replay",
    "SessionInfoUpdate",
    "SessionInfoUpdateV1",
    "decode",
    "encode_frame",
    "patch_from_update",
    "replay_of",
]
