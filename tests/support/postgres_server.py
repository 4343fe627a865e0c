"""A throwaway PostgreSQL server for the tests and the benchmarks, started from the machine's own
server binaries (Debian's ``postgresql`` package; ``.ci/run`` installs it where it is missing).

:func:`start` runs ``initdb`` in a fresh temporary directory (as the ``postgres`` system user
when run as root: ``initdb`` refuses root), starts the server on 127.0.0.1 at a free port (its
Unix socket in the same directory) and creates a role with a password and a database it owns;
:meth:`PostgresServer.stop` stops it and removes the directory. ``AGENT_META_POSTGRES_URL``
points at an existing server instead (its role must be allowed to create schemas in its
database). Each test gets a schema of its own (:meth:`PostgresServer.fresh_url`).

When there is no server to start, :func:`start` raises :class:`ServerUnavailableError` with the
reason; the fixtures skip with it, or fail when ``AGENT_META_POSTGRES_REQUIRED=1`` (as CI sets
it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

URL_VARIABLE = "AGENT_META_POSTGRES_URL"
REQUIRED_VARIABLE = "AGENT_META_POSTGRES_REQUIRED"
ROLE = "agent_meta_test"
DATABASE = "agent_meta_test"
SYSTEM_USER = "postgres"


class ServerUnavailableError(Exception):
    """No PostgreSQL server can be had here; the message says why."""


def required() -> bool:
    """Whether a missing server is a failure rather than a skip (CI)."""
    return os.environ.get(REQUIRED_VARIABLE) == "1"


@dataclasses.dataclass
class PostgresServer:
    """A server the tests may use: ``url`` logs in as a role with a password."""

    url: str
    password: str
    directory: Path | None = None
    """The throwaway cluster's directory (``None`` for a server given by URL)."""
    pg_ctl: list[str] = dataclasses.field(default_factory=list)
    _schemas: int = 0

    def fresh_url(self, prefix: str = "t") -> str:
        """The URL of a new, empty schema (made the connections' ``search_path``)."""
        import psycopg

        self._schemas += 1
        schema = f"{prefix}_{self._schemas}_{secrets.token_hex(4)}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        return with_search_path(self.url, schema)

    def stop(self) -> None:
        """Stop the throwaway server and remove its files (nothing for a given URL)."""
        if self.directory is None:
            return
        subprocess.run(
            [*self.pg_ctl, "-m", "immediate", "-w", "stop"], capture_output=True, check=False
        )
        shutil.rmtree(self.directory, ignore_errors=True)
        self.directory = None


def with_search_path(url: str, schema: str) -> str:
    """``url`` with its connections' ``search_path`` set to ``schema``."""
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query)
    query = [(k, v) for k, v in query if k != "options"]
    query.append(("options", f"-c search_path={schema}"))
    return urllib.parse.urlunsplit(
        parts._replace(query=urllib.parse.urlencode(query, quote_via=urllib.parse.quote))
    )


def start(*, fsync: bool = False) -> PostgresServer:
    """A server for this run: the one ``AGENT_META_POSTGRES_URL`` names, or a new throwaway
    cluster (``fsync=False`` trades crash safety, which tests do not need, for speed)."""
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        from agent_meta._install_hint import install_hint

        raise ServerUnavailableError(
            f"psycopg is not installed ({exc}): {install_hint('postgres')}"
        ) from None
    given = os.environ.get(URL_VARIABLE)
    if given:
        password = urllib.parse.urlsplit(given).password or ""
        return PostgresServer(given, password)
    bindir = _binaries()
    run_as = _system_user()
    directory = Path(tempfile.mkdtemp(prefix="agent-meta-pg-", dir=_parent(run_as)))
    try:
        return _cluster(bindir, run_as, directory, fsync)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise


def _binaries() -> Path:
    """The directory of ``initdb``, ``pg_ctl`` and ``postgres``."""
    candidates: list[str] = []
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        found = subprocess.run(
            ["pg_config", "--bindir"], capture_output=True, text=True, check=True
        ).stdout.strip()
        candidates.append(found)
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True)
    if on_path := shutil.which("initdb"):
        candidates.append(str(Path(on_path).parent))
    for candidate in candidates:
        if all((Path(candidate) / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres")):
            return Path(candidate)
    raise ServerUnavailableError(
        "no PostgreSQL server binaries (initdb, pg_ctl, postgres) in `pg_config --bindir`, "
        "/usr/lib/postgresql/*/bin or PATH: apt-get install postgresql, or set "
        f"{URL_VARIABLE}"
    )


def _version(path: str) -> float:
    try:
        return float(Path(path).parent.name)
    except ValueError:
        return 0.0


def _system_user() -> str | None:
    """Whom to run the server as: ``postgres`` when we are root (``initdb`` refuses root),
    else ourselves (``None``)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        raise ServerUnavailableError(
            f"running as root and there is no {SYSTEM_USER!r} system user to run initdb as "
            "(initdb refuses root): apt-get install postgresql creates it"
        ) from None
    if shutil.which("runuser") is None:
        raise ServerUnavailableError(
            "running as root without runuser (util-linux) to start PostgreSQL"
        )
    return SYSTEM_USER


def _parent(run_as: str | None) -> str | None:
    """Where to make the cluster's directory: the temp directory, unless the server's user
    could not reach it (a private ``TMPDIR`` of root's), then ``/tmp``."""
    if run_as is None or os.stat(tempfile.gettempdir()).st_mode & 0o001:
        return None
    return "/tmp"  # world-traversable; the directory made in it is private


def _cluster(bindir: Path, run_as: str | None, directory: Path, fsync: bool) -> PostgresServer:
    as_user = [] if run_as is None else ["runuser", "-u", run_as, "--"]
    if run_as is not None:
        entry = pwd.getpwnam(run_as)
        os.chown(directory, entry.pw_uid, entry.pw_gid)
    data = directory / "data"
    _run(
        [
            *as_user,
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--no-sync",
            "--no-instructions",
        ],
        "initdb",
    )
    pg_ctl = [*as_user, str(bindir / "pg_ctl"), "-D", str(data)]
    for _attempt in range(3):  # another process may take the free port first
        port = _free_port()
        settings = [
            "-c listen_addresses=127.0.0.1",
            f"-c port={port}",
            f"-c unix_socket_directories={directory}",
            f"-c fsync={'on' if fsync else 'off'}",
            "-c max_connections=200",
        ]
        started = subprocess.run(
            [*pg_ctl, "-o", " ".join(settings), "-l", str(directory / "log"), "-w", "start"],
            capture_output=True,
            text=True,
            check=False,
        )
        if started.returncode == 0:
            break
    else:
        log = (directory / "log").read_text(errors="replace")[-2000:]
        raise ServerUnavailableError(f"PostgreSQL did not start: {started.stderr.strip()}\n{log}")
    password = f"pw-{secrets.token_hex(12)}"
    server = PostgresServer(
        f"postgresql://{ROLE}:{password}@127.0.0.1:{port}/{DATABASE}", password, directory, pg_ctl
    )
    try:
        _create_role(directory, port, password)
    except BaseException:
        server.stop()
        raise
    return server


def _create_role(socket_dir: Path, port: int, password: str) -> None:
    import psycopg

    admin = f"host={socket_dir} port={port} user=postgres dbname=postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{password}'")
        conn.execute(f"CREATE DATABASE {DATABASE} OWNER {ROLE}")


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        why = done.stderr.strip()[-2000:]
        raise ServerUnavailableError(f"{what} failed ({done.returncode}): {why}")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def running(*, fsync: bool = False) -> Iterator[PostgresServer]:
    """:func:`start`, stopped at the end of the block."""
    server = start(fsync=fsync)
    try:
        yield server
    finally:
        server.stop()
