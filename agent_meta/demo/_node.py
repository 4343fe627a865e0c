"""Finding the demo's TypeScript SDK client (``integration/node/ts_client.mjs`` of a checkout,
with its ``node_modules``), wherever the demo runs from.

The script is not in the wheel: it lives in the checkout agent_meta was installed from
(:func:`agent_meta._install_hint.checkouts`: the directory holding the package for an editable
install, the one ``direct_url.json`` names for ``pip install /path/to/checkout``); never the
current directory, which may be any project's.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from .._install_hint import checkouts

__all__ = ["NodeClient", "find_node_client"]

_SCRIPT = Path("integration") / "node" / "ts_client.mjs"
_SDK = Path("node_modules") / "@agentclientprotocol" / "sdk"


class NodeClient:
    """Where the TypeScript client is, or why it cannot run and how to get it."""

    def __init__(self, script: Path | None, missing: str) -> None:
        self.script = script
        self.missing = missing


def find_node_client() -> NodeClient:
    """``ts_client.mjs`` when Node.js and the client's installed SDK are there; otherwise what
    is missing and the command that gets it."""
    roots = [root for root in checkouts() if (root / _SCRIPT).is_file()]
    if not roots:
        return NodeClient(
            None,
            "no checkout of agent_meta found (the client is integration/node/ts_client.mjs of a "
            "checkout: install agent_meta from one, then run npm ci in its integration/node)",
        )
    if shutil.which("node") is None:
        return NodeClient(None, "Node.js is not on PATH (Node 20 or later runs the client)")
    for root in roots:
        script = root / _SCRIPT
        if (script.parent / _SDK).is_dir():
            return NodeClient(script, "")
    folder = roots[0] / _SCRIPT.parent
    return NodeClient(None, f"the client's SDK is not installed (cd {folder} && npm ci)")
