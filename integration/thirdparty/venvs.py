"""The third-party agents' own virtualenvs, built from this repository's files.

Each agent gets a venv of its own, on a Python it runs on, from the pinned requirement file next
to this module (``requirements-<agent>.txt``), with agent_meta installed from the repository
(editable, with its ``sdk`` extra, whose dependencies the pins already hold). They live under
``.nox/thirdparty-agents/`` (``AGENT_META_THIRDPARTY_VENVS`` moves them), so that
``rm -rf .nox/thirdparty*`` starts from scratch. A venv is reused while its stamp matches:
the requirement file, the interpreter and ``pyproject.toml``.

Stdlib only: ``nox -s thirdparty`` runs it (``python integration/thirdparty/venvs.py --report
FILE``) in the background while it installs its own requirements, and the tests read the report;
run alone, the tests build what is missing themselves (:func:`ensure`). Venvs are built in
parallel, one ``pip`` each.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import fcntl
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

HERE: Final = Path(__file__).resolve().parent
REPO: Final = HERE.parent.parent
VENVS_ENV: Final = "AGENT_META_THIRDPARTY_VENVS"
"""Where the venvs go (default: ``.nox/thirdparty-agents`` in the repository)."""
REPORT_ENV: Final = "AGENT_META_THIRDPARTY_BUILDS"
"""A report written by ``venvs.py --report``: the tests take it instead of building."""

#: CPython 3.12.1 cannot import kimi-cli 1.52.0: ``SlashCommand[F](...)`` on a frozen, slotted,
#: generic dataclass raises ``TypeError: super(type, obj)`` (fixed in later CPython releases).
SLOTS_PROBE: Final = (
    "from dataclasses import dataclass\n"
    "@dataclass(frozen=True, slots=True, kw_only=True)\n"
    "class C[F]:\n"
    "    x: int\n"
    "C[int](x=1)\n"
)


@dataclasses.dataclass(frozen=True, slots=True)
class Recipe:
    """How to build one agent's venv."""

    name: str
    requirements: str
    """The pinned requirement file, next to this module."""
    pythons: tuple[str, ...]
    """Python versions to look for, preferred first (the one the pins were frozen on)."""
    probe: str = ""
    """Code the interpreter must run without error."""
    probe_failure: str = ""
    """What a failing probe means, for the skip reason."""


RECIPES: Final = {
    r.name: r
    for r in (
        Recipe("fast-agent", "requirements-fast-agent.txt", ("3.12", "3.13")),
        Recipe("mistral-vibe", "requirements-mistral-vibe.txt", ("3.12", "3.13")),
        Recipe("hermes-agent", "requirements-hermes-agent.txt", ("3.11", "3.12", "3.13")),
        Recipe(
            "kimi-cli",
            "requirements-kimi-cli.txt",
            ("3.13", "3.12"),
            probe=SLOTS_PROBE,
            probe_failure="kimi-cli does not import there (CPython 3.12.1's slotted generic "
            "dataclass bug, or a Python older than 3.12)",
        ),
        Recipe("pydantic-acp", "requirements-pydantic-acp.txt", ("3.12", "3.13")),
        Recipe("langchain-acp", "requirements-langchain-acp.txt", ("3.12", "3.13")),
        Recipe("bub", "requirements-bub.txt", ("3.12", "3.13")),
        Recipe("gptme", "requirements-gptme.txt", ("3.12", "3.13")),
        Recipe("box-agent", "requirements-box-agent.txt", ("3.12", "3.13")),
    )
}


@dataclasses.dataclass(frozen=True, slots=True)
class Venv:
    """A built venv, or why there is none."""

    name: str
    path: str | None
    python_version: str | None
    reason: str | None = None
    """Why the agent cannot run here (``path`` is then ``None``)."""
    seconds: float = 0.0
    """How long the build took (0 when the venv was reused)."""

    @property
    def bin(self) -> Path:
        assert self.path is not None, self.reason
        return Path(self.path) / "bin"


def venvs_root() -> Path:
    return Path(os.environ.get(VENVS_ENV) or REPO / ".nox" / "thirdparty-agents")


def _candidates(version: str) -> Iterator[str]:
    on_path = shutil.which(f"python{version}")
    if on_path is not None:
        yield on_path
    roots = {os.environ.get("PYENV_ROOT") or "", os.path.expanduser("~/.pyenv"), "/root/.pyenv"}
    for root in sorted(r for r in roots if r):
        yield from sorted(glob.glob(f"{root}/versions/{version}*/bin/python"), reverse=True)


def find_interpreter(recipe: Recipe) -> tuple[str | None, str, list[str]]:
    """The first interpreter that runs (and passes the recipe's probe): its path, its version,
    and what was tried (for a skip reason)."""
    tried: list[str] = []
    for version in recipe.pythons:
        found = False
        for candidate in _candidates(version):
            found = True
            try:
                done = subprocess.run(
                    [candidate, "-c", "import sys; print(sys.version.split()[0])"],
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=False,
                )
            except OSError as exc:
                tried.append(f"{candidate} ({exc})")
                continue
            if done.returncode != 0:
                said = (done.stderr.strip().splitlines() or ["no output"])[0]
                tried.append(f"{candidate} (does not run: {said[:120]})")
                continue
            full = done.stdout.strip()
            if recipe.probe:
                probed = subprocess.run(
                    [candidate, "-c", recipe.probe],
                    capture_output=True,
                    timeout=60,
                    check=False,
                )
                if probed.returncode != 0:
                    tried.append(f"{candidate} (Python {full}: {recipe.probe_failure})")
                    continue
            return candidate, full, tried
        if not found:
            tried.append(f"python{version} (not on PATH, not under ~/.pyenv/versions)")
    return None, "", tried


def _stamp(recipe: Recipe, interpreter: str, version: str) -> dict[str, str]:
    digest = hashlib.sha256()
    for path in (HERE / recipe.requirements, REPO / "pyproject.toml"):
        digest.update(path.read_bytes())
    return {"files": digest.hexdigest(), "interpreter": interpreter, "python": version}


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another build of the same venv waits here
        yield


def build(recipe: Recipe, root: Path | None = None) -> Venv:
    """Build ``recipe``'s venv unless an up-to-date one exists; never raises for what the
    machine lacks (no interpreter, no network): the result says why."""
    root = venvs_root() if root is None else root
    root.mkdir(parents=True, exist_ok=True)
    interpreter, version, tried = find_interpreter(recipe)
    if interpreter is None:
        wanted = " or ".join(recipe.pythons)
        return Venv(
            recipe.name, None, None, f"no Python {wanted} for {recipe.name}: {'; '.join(tried)}"
        )
    venv = root / recipe.name
    stamp_file = venv / "agent-meta-stamp.json"
    stamp = _stamp(recipe, interpreter, version)
    with _locked(root / f"{recipe.name}.lock"):
        with contextlib.suppress(OSError, ValueError):
            if json.loads(stamp_file.read_text()) == stamp:
                return Venv(recipe.name, str(venv), version)
        started = time.monotonic()
        shutil.rmtree(venv, ignore_errors=True)
        log = root / f"{recipe.name}.log"
        steps = _build_steps(recipe, interpreter, venv)
        with log.open("w") as output:
            for step in steps:
                output.write(f"$ {' '.join(step)}\n")
                output.flush()
                done = subprocess.run(
                    step, stdout=output, stderr=subprocess.STDOUT, env=_BUILD_ENV, check=False
                )
                if done.returncode != 0:
                    tail = log.read_text(errors="replace").strip().splitlines()[-6:]
                    return Venv(
                        recipe.name,
                        None,
                        None,
                        f"cannot build {recipe.name}'s venv on Python {version} (no network or "
                        f"no PyPI?): `{' '.join(step[:5])} ...` exited {done.returncode}; "
                        f"{log}: " + " | ".join(tail),
                    )
        stamp_file.write_text(json.dumps(stamp))
        return Venv(recipe.name, str(venv), version, seconds=time.monotonic() - started)


_BUILD_ENV: Final = {**os.environ, "UV_HTTP_TIMEOUT": "30"}
"""uv's network timeout for the builds (pip gets ``--timeout``)."""


def _build_steps(recipe: Recipe, interpreter: str, venv: Path) -> list[list[str]]:
    """The commands that build ``recipe``'s venv: with uv when it is on ``PATH`` (as under
    ``nox``, whose sessions it builds too: a few seconds where pip takes minutes), else with the
    interpreter's venv and pip. Few retries and a short timeout: an offline machine gives up in
    seconds, not minutes."""
    requirements = ["-r", str(HERE / recipe.requirements), "-e", f"{REPO}[sdk]"]
    uv = shutil.which("uv")
    if uv is not None:
        python = str(venv / "bin" / "python")
        return [
            [uv, "venv", "--quiet", "--seed", "--python", interpreter, str(venv)],
            [uv, "pip", "install", "--quiet", "--python", python, *requirements],
        ]
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check"]
    return [
        [interpreter, "-m", "venv", str(venv)],
        [*pip, "--retries", "2", "--timeout", "30", *requirements],
    ]


def build_all(names: Sequence[str] | None = None) -> dict[str, Venv]:
    """Build the venvs of ``names`` (default: all) in parallel."""
    chosen = [RECIPES[n] for n in (names or list(RECIPES))]
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(chosen)) as pool:
        built = list(pool.map(build, chosen))
    return {venv.name: venv for venv in built}


def ensure_all() -> dict[str, Venv]:
    """Every agent's venv: from the report ``nox -s thirdparty`` made, else built now."""
    report = os.environ.get(REPORT_ENV)
    if report:
        entries = json.loads(Path(report).read_text())
        return {name: Venv(**entry) for name, entry in entries.items()}
    return build_all()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("agents", nargs="*", help=f"any of {', '.join(RECIPES)} (default: all)")
    parser.add_argument("--report", type=Path, help="write the outcome here as JSON")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.agents) - RECIPES.keys())
    if unknown:
        parser.error(f"unknown agents: {', '.join(unknown)}")
    started = time.monotonic()
    built = build_all(args.agents)
    for venv in built.values():
        state = f"Python {venv.python_version}" if venv.reason is None else venv.reason
        took = f" (built in {venv.seconds:.0f} s)" if venv.seconds else ""
        print(f"thirdparty venv {venv.name}: {state}{took}", file=sys.stderr)
    print(f"thirdparty venvs ready in {time.monotonic() - started:.0f} s", file=sys.stderr)
    if args.report is not None:
        args.report.write_text(json.dumps({n: dataclasses.asdict(v) for n, v in built.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
