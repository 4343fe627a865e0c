"""How to install an extra of agent_meta, said the same way by every error message.

agent_meta is not on a package index yet: it is installed from a checkout (README, "Install").
The hint names the checkout this copy was installed from when that is known (an editable
install, or ``direct_url.json`` of ``pip install /path/to/checkout``, PEP 610), else the
placeholder ``/path/to/agent_meta``. :func:`import_extra` imports a module of an extra, or says
what to install (the commands' ``agent``, ``demo``). Stdlib only, imported only when a hint may
be given.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

if TYPE_CHECKING:
    from types import ModuleType

__all__ = ["PLACEHOLDER", "checkouts", "import_extra", "install_hint", "installed_from"]

PLACEHOLDER = "/path/to/agent_meta"
"""Stands for a checkout of agent_meta when none is known."""

DISTRIBUTION = "agent-meta"

PACKAGE_PARENT = Path(__file__).resolve().parent.parent
"""The directory holding the ``agent_meta`` package: the checkout itself when installed
editable (``pip install -e``), ``site-packages`` otherwise."""


def installed_from() -> Path | None:
    """The local directory ``pip install DIR`` installed this distribution from, if any
    (``direct_url.json``, PEP 610: a wheel file or an index leave none)."""
    from importlib import metadata  # when a hint is given, not when import_extra succeeds

    try:
        text = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    try:
        record = json.loads(text or "")
    except ValueError:
        return None
    if not isinstance(record, dict) or "dir_info" not in record:
        return None
    url = urlparse(str(record.get("url", "")))
    return Path(unquote(url.path)) if url.scheme == "file" else None


def checkouts() -> list[Path]:
    """The checkouts this agent_meta may have been installed from, nearest first: the directory
    holding the package (an editable install), then the one ``direct_url.json`` names."""
    found = [PACKAGE_PARENT, installed_from()]
    roots = [root for root in found if root is not None and (root / "pyproject.toml").is_file()]
    return list(dict.fromkeys(roots))


def install_hint(extras: str) -> str:
    """``pip install '<checkout>[extras]'``, for the environment that lacks them."""
    roots = checkouts()
    return f"pip install '{roots[0] if roots else PLACEHOLDER}[{extras}]'"


def import_extra(module: str, needs: str, extra: str) -> ModuleType | None:
    """``module``, or ``None`` after saying on stderr that ``needs`` (the command and what it
    needs), why the import failed, and how to install ``extra``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        print(
            f"{needs} ({exc}).\nInstall the '{extra}' extra: {install_hint(extra)}", file=sys.stderr
        )
        return None
