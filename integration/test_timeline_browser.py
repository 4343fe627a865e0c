"""The timeline's HTML page in a real headless browser (Chromium, from Debian's packages).

A broken agent runs behind ``agent-meta proxy --log`` while ``agent-meta check`` drives it; the
log becomes a page with ``agent-meta timeline --html``. Chromium then renders it twice: its DOM
must hold the session table with the finding's row, and its screenshot must show the finding's
highlight colour (the PNG is decoded here, with the standard library).
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WIDTH, HEIGHT = 1200, 900
#: The background of a row with a finding (``tr.finding`` in the page's style sheet).
FINDING_RGB = (0xFD, 0xE4, 0xE4)


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path is not None:
            return path
    pytest.skip("chromium is not installed (Debian: apt-get install -y chromium)")


def browser(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        f"--window-size={WIDTH},{HEIGHT}",
        *args,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True)


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_meta", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and the unfiltered rows of an 8-bit RGB(A), non-interlaced PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, idat = 8, b""
    width = height = channels = 0
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert (depth, interlace) == (8, 0), "only 8-bit non-interlaced PNGs"
            channels = {2: 3, 6: 4}[color]
        elif kind == b"IDAT":
            idat += body
        position += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        filter_type = raw[start]
        row = bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = row[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if filter_type == 1:
                row[i] = (row[i] + left) & 0xFF
            elif filter_type == 2:
                row[i] = (row[i] + up) & 0xFF
            elif filter_type == 3:
                row[i] = (row[i] + (left + up) // 2) & 0xFF
            elif filter_type == 4:
                estimate = left + up - corner
                pa, pb, pc = abs(estimate - left), abs(estimate - up), abs(estimate - corner)
                best = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                row[i] = (row[i] + best) & 0xFF
        rows.append(bytes(row))
        previous = row
    return width, height, rows


def count_rgb(rows: list[bytes], width: int, rgb: tuple[int, int, int]) -> int:
    channels = len(rows[0]) // width
    wanted = bytes(rgb)
    return sum(
        1 for row in rows for x in range(width) if row[x * channels : x * channels + 3] == wanted
    )


def test_the_html_timeline_in_a_real_browser(tmp_path: Path) -> None:
    binary = chromium()
    log, page, shot = tmp_path / "log.ndjson", tmp_path / "timeline.html", tmp_path / "shot.png"
    agent = [sys.executable, "-m", "tests.broken_agents.frame_after_close"]  # from ROOT
    proxied = [sys.executable, "-m", "agent_meta", "proxy", "--log", str(log), "--", *agent]
    checked = run("check", "--protocol", "2", "--prompt", "/meta set a 1", "--", *proxied)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "[fence]" in checked.stderr  # the proxy saw it too
    rendered = run("timeline", str(log), "--html", str(page))
    assert rendered.returncode == 0, rendered.stderr

    dom = browser(binary, tmp_path / "profile-dom", "--dump-dom", page.as_uri()).stdout
    assert "<h2 " in dom
    assert "session broken-1" in dom
    assert 'class="agent finding"' in dom
    assert "[fence]" in dom

    browser(binary, tmp_path / "profile-shot", f"--screenshot={shot}", page.as_uri())
    width, height, rows = png_pixels(shot.read_bytes())
    assert (width, height) == (WIDTH, HEIGHT)
    assert count_rgb(rows, width, FINDING_RGB) > 1000, "no highlighted finding on screen"
