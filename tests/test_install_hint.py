"""Every "install the extra" message names the checkout agent_meta came from, the same way."""

from __future__ import annotations

import json
from importlib import metadata
from typing import TYPE_CHECKING

from agent_meta import _install_hint
from agent_meta._install_hint import PLACEHOLDER, install_hint

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


class _Distribution:
    def __init__(self, direct_url: str | None) -> None:
        self._direct_url = direct_url

    def read_text(self, name: str) -> str | None:
        assert name == "direct_url.json"
        return self._direct_url


def _installed(monkeypatch: pytest.MonkeyPatch, parent: Path, direct_url: object) -> None:
    """As if the package sat in ``parent`` and pip had recorded ``direct_url``."""
    text = None if direct_url is None else json.dumps(direct_url)
    monkeypatch.setattr(_install_hint, "PACKAGE_PARENT", parent)
    monkeypatch.setattr(metadata, "distribution", lambda name: _Distribution(text))


def _checkout(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "pyproject.toml").write_text("[project]\nname = 'agent-meta'\n")
    return path


def test_an_editable_install_names_its_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = _checkout(tmp_path / "agent_meta")
    _installed(monkeypatch, checkout, {"url": checkout.as_uri(), "dir_info": {"editable": True}})
    assert install_hint("sdk") == f"pip install '{checkout}[sdk]'"


def test_an_install_from_a_checkout_names_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = _checkout(tmp_path / "my checkout")
    site = tmp_path / "venv" / "lib" / "site-packages"
    site.mkdir(parents=True)
    _installed(monkeypatch, site, {"url": checkout.as_uri(), "dir_info": {}})
    assert install_hint("sdk-http,postgres") == f"pip install '{checkout}[sdk-http,postgres]'"


def test_an_install_from_a_wheel_names_a_placeholder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = tmp_path / "agent_meta-0.1.0-py3-none-any.whl"
    _installed(monkeypatch, tmp_path, {"url": wheel.as_uri(), "archive_info": {}})
    assert install_hint("demo") == f"pip install '{PLACEHOLDER}[demo]'"
    _installed(monkeypatch, tmp_path, None)
    assert install_hint("demo") == f"pip install '{PLACEHOLDER}[demo]'"
