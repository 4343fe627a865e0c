"""Where the demo looks for its TypeScript client, and what it says when it cannot run it."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from agent_meta.demo import _node

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def _checkout(root: Path, *, installed: bool) -> Path:
    script = root / "integration" / "node" / "ts_client.mjs"
    script.parent.mkdir(parents=True)
    script.write_text("// the client\n")
    if installed:
        (script.parent / "node_modules" / "@agentclientprotocol" / "sdk").mkdir(parents=True)
    return script


def _here(monkeypatch: pytest.MonkeyPatch, roots: list[Path], node: bool = True) -> None:
    monkeypatch.setattr(_node, "checkouts", lambda: roots)
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/node" if node else None)


def test_the_client_of_the_checkout_is_found_whatever_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = _checkout(tmp_path / "checkout", installed=True)
    _checkout(tmp_path / "cwd", installed=True)
    monkeypatch.chdir(tmp_path / "cwd")
    _here(monkeypatch, [tmp_path / "checkout"])
    assert _node.find_node_client().script == script


def test_without_its_sdk_it_says_the_command_that_gets_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = _checkout(tmp_path / "checkout", installed=False)
    _here(monkeypatch, [tmp_path / "checkout"])
    found = _node.find_node_client()
    assert found.script is None
    assert f"cd {script.parent} && npm ci" in found.missing


def test_without_node_or_a_checkout_it_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _checkout(tmp_path / "checkout", installed=True)
    _here(monkeypatch, [tmp_path / "checkout"], node=False)
    assert "Node.js is not on PATH" in _node.find_node_client().missing
    _here(monkeypatch, [tmp_path / "elsewhere"])
    assert "no checkout of agent_meta found" in _node.find_node_client().missing
