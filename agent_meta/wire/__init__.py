"""Layer 2, wire: the pydantic models of ACP ``session/update`` and JSON-RPC envelopes, NDJSON
decoding, and the JSON-RPC error codes. ``_meta: null`` and an omitted ``_meta`` stay distinct
through every parse and dump here.
"""

__all__: list[str] = []
