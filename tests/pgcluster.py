"""Throwaway PostgreSQL servers for tests and benchmarks.

``PostgresCluster.start()`` runs ``initdb`` into a fresh temporary directory and
starts a private ``postgres`` that listens on 127.0.0.1 only, tuned for speed
rather than durability (fsync and friends are off: the data is disposable).
``stop()`` kills the server and deletes the directory.

Typical use::

    with PostgresCluster.start() as pg:
        url = pg.create_database()  # postgresql+psycopg://postgres@127.0.0.1:PORT/<random>
        # ... use the database ...

The binaries are looked up by :func:`find_pg_bindir`.  ``initdb`` and
``postgres`` refuse to run as root, so when this process is root they are run
as the ``postgres`` system user through ``runuser``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Self

import psycopg
from psycopg import sql

__all__ = ["PostgresCluster", "PostgresUnavailable", "find_pg_bindir"]

BINDIR_ENV = "MEMSYNC_PG_BINDIR"
"""Environment variable that, when set, names the directory holding the PostgreSQL binaries."""

_HOST = "127.0.0.1"
_SUPERUSER = "postgres"
_OS_USER = "postgres"  # the unprivileged account used when we are root
_REQUIRED_BINARIES = ("initdb", "pg_ctl", "postgres")
_START_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 30.0
_INITDB_TIMEOUT_S = 120.0
_PORT_ATTEMPTS = 3
_LOG_TAIL_LINES = 40
# Linux caps sun_path at 108 bytes including the NUL terminator.
_MAX_SOCKET_PATH = 107
_DBNAME_RE = re.compile(r"[a-z_][a-z0-9_]{0,62}")


class PostgresUnavailable(RuntimeError):
    """PostgreSQL binaries are missing, or a throwaway server could not be started."""


def _has_binaries(bindir: Path) -> bool:
    return all(os.access(bindir / name, os.X_OK) for name in _REQUIRED_BINARIES)


def _version_key(bindir: Path) -> tuple[int, ...]:
    # Debian layout is /usr/lib/postgresql/<version>/bin; compare numerically so
    # that "10" sorts above "9.6".
    parts = re.findall(r"\d+", bindir.parent.name)
    return tuple(int(p) for p in parts)


def find_pg_bindir() -> Path | None:
    """Return the directory holding ``initdb``, ``pg_ctl`` and ``postgres``, or ``None``.

    Lookup order: ``$MEMSYNC_PG_BINDIR`` (authoritative when set), the highest
    ``/usr/lib/postgresql/*/bin``, ``pg_config --bindir``, then ``pg_ctl`` on ``PATH``.
    """
    override = os.environ.get(BINDIR_ENV)
    if override:
        # An explicit choice that is wrong should fail loudly rather than
        # silently fall back to some other installed version.
        path = Path(override)
        return path if _has_binaries(path) else None

    candidates = [p for p in Path("/usr/lib/postgresql").glob("*/bin") if _has_binaries(p)]
    if candidates:
        return max(candidates, key=_version_key)

    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        try:
            out = subprocess.run(
                [pg_config, "--bindir"],
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            out = ""
        if out and _has_binaries(Path(out)):
            return Path(out)

    pg_ctl = shutil.which("pg_ctl")
    if pg_ctl is not None and _has_binaries(Path(pg_ctl).parent):
        return Path(pg_ctl).parent
    return None


def _free_port() -> int:
    # The port is released before postgres binds it, so another process can
    # steal it in between; start() retries with a new port if that happens.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((_HOST, 0))
        port: int = s.getsockname()[1]
        return port


def _conf_quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _clean_env() -> dict[str, str]:
    # Stray PG* variables (PGDATA, PGPORT, PGHOST, ...) from the developer's
    # shell would otherwise leak into initdb/pg_ctl; LC_ALL keeps messages
    # predictable for the error reports.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C"
    return env


def _tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"(no log available: {exc})"
    return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"


class PostgresCluster:
    """A private, disposable PostgreSQL server on 127.0.0.1.

    Create one with :meth:`start`; release it with :meth:`stop` or by using
    the instance as a context manager.  Every connection is as the
    ``postgres`` superuser with ``trust`` authentication (no password).
    """

    host: str
    """Address the server listens on (always ``127.0.0.1``)."""
    port: int
    """TCP port the server listens on."""
    bindir: Path
    """Directory of the PostgreSQL binaries in use."""
    base_path: Path
    """Temporary directory holding the data directory and the server log."""
    data_dir: Path
    """The cluster's data directory (also its Unix socket directory)."""
    log_path: Path
    """Server log file; its tail is included in :class:`PostgresUnavailable` messages."""

    def __init__(self, *, bindir: Path, base_path: Path, port: int, run_as: str | None) -> None:
        """Record an already-initialised cluster; use :meth:`start` instead of calling this."""
        self.host = _HOST
        self.port = port
        self.bindir = bindir
        self.base_path = base_path
        self.data_dir = base_path / "data"
        self.log_path = base_path / "postgres.log"
        self._run_as = run_as
        self._stopped = False

    # ------------------------------------------------------------------ start

    @classmethod
    def start(cls, base_dir: Path | None = None) -> Self:
        """Initialise and start a new server in a fresh temp dir (under ``base_dir`` if given).

        Blocks until a client connection succeeds (at most about 30 s).

        Raises:
            PostgresUnavailable: the binaries cannot be found, or the server
                could not be initialised or started (the message includes the
                tail of the server log).
        """
        bindir = find_pg_bindir()
        if bindir is None:
            where = os.environ.get(BINDIR_ENV)
            hint = (
                f"${BINDIR_ENV}={where!r} does not contain {', '.join(_REQUIRED_BINARIES)}"
                if where
                else "install the PostgreSQL server package (e.g. `apt-get install postgresql`)"
                f" or set ${BINDIR_ENV}"
            )
            raise PostgresUnavailable(f"PostgreSQL server binaries not found: {hint}")

        run_as: str | None = None
        owner: pwd.struct_passwd | None = None
        if os.geteuid() == 0:
            run_as = _OS_USER
            try:
                owner = pwd.getpwnam(_OS_USER)
            except KeyError:
                raise PostgresUnavailable(
                    f"running as root, but there is no {_OS_USER!r} system user to run"
                    " initdb/postgres as (they refuse to run as root)"
                ) from None
            if shutil.which("runuser") is None:
                raise PostgresUnavailable("running as root, but `runuser` is not available")

        if base_dir is not None:
            base_dir.mkdir(parents=True, exist_ok=True)
        base_path = Path(tempfile.mkdtemp(prefix="memsync-pg-", dir=base_dir))
        cluster = cls(bindir=bindir, base_path=base_path, port=0, run_as=run_as)
        try:
            if owner is not None:
                # mkdtemp makes a 0700 root-owned dir; hand it to the server's user.
                os.chown(base_path, owner.pw_uid, owner.pw_gid)
            cluster._check_access()
            cluster._initdb()
            cluster._start_server()
            cluster._wait_until_connectable()
        except BaseException:
            # Also on KeyboardInterrupt: never leave an orphan server behind.
            cluster.stop()
            raise
        # Safety net for callers that forget stop() or die from an exception
        # outside a with-block; stop() is idempotent and unregisters this.
        atexit.register(cluster.stop)
        return cluster

    def _cmd(self, binary: str, *args: str) -> list[str]:
        argv = [str(self.bindir / binary), *args]
        if self._run_as is not None:
            return ["runuser", "-u", self._run_as, "--", *argv]
        return argv

    def _run(self, argv: list[str], timeout: float, what: str) -> subprocess.CompletedProcess[str]:
        try:
            # cwd=base_path: as the postgres user, root's cwd is often unreadable.
            # stdin=DEVNULL so nothing ever waits on a terminal.
            return subprocess.run(
                argv,
                cwd=self.base_path,
                env=_clean_env(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise PostgresUnavailable(
                f"{what} timed out after {timeout:.0f} s\n--- server log tail ---\n"
                + _tail(self.log_path)
            ) from None
        except OSError as exc:
            raise PostgresUnavailable(f"{what} could not be run: {exc}") from exc

    def _check_access(self) -> None:
        if self._run_as is None:
            return
        # base_dir may sit under a directory the postgres user cannot traverse
        # (e.g. /root); catch that here with a clear message instead of a
        # cryptic initdb failure.
        res = self._run(
            ["runuser", "-u", self._run_as, "--", "test", "-w", str(self.base_path)],
            timeout=10,
            what="access check",
        )
        if res.returncode != 0:
            raise PostgresUnavailable(
                f"the {self._run_as!r} user cannot write to {self.base_path}; pass a base_dir"
                " whose parent directories it can traverse"
            )

    def _initdb(self) -> None:
        res = self._run(
            self._cmd(
                "initdb",
                "-D",
                str(self.data_dir),
                "-A",
                "trust",
                "-U",
                _SUPERUSER,
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
            ),
            timeout=_INITDB_TIMEOUT_S,
            what="initdb",
        )
        if res.returncode != 0:
            raise PostgresUnavailable(
                f"initdb failed (exit {res.returncode}):\n{res.stdout}\n{res.stderr}".rstrip()
            )

    def _write_port_conf(self, port: int) -> None:
        socket_dir = str(self.data_dir)
        if len(f"{socket_dir}/.s.PGSQL.{port}.lock") > _MAX_SOCKET_PATH:
            # postgres refuses to start if a socket path would be too long; we
            # only use TCP anyway, so just go without a Unix socket.
            socket_dir = ""
        settings = {
            "listen_addresses": _HOST,
            "port": str(port),
            "unix_socket_directories": socket_dir,
            # Throwaway data: durability costs time and buys nothing.
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "max_connections": "200",
        }
        # Settings go into postgresql.auto.conf (read last, overrides
        # postgresql.conf) instead of `pg_ctl -o`, so paths with spaces need no
        # shell-style quoting.  Rewritten whole on each port attempt; opening an
        # existing file keeps its owner, so the postgres user can still read it.
        lines = ["# Written by tests/pgcluster.py"]
        lines += [f"{key} = {_conf_quote(value)}" for key, value in settings.items()]
        auto_conf = self.data_dir / "postgresql.auto.conf"
        with auto_conf.open("w", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")

    def _start_server(self) -> None:
        last_error = ""
        for _ in range(_PORT_ATTEMPTS):
            port = _free_port()
            self._write_port_conf(port)
            res = self._run(
                self._cmd(
                    "pg_ctl",
                    "start",
                    "-D",
                    str(self.data_dir),
                    "-l",
                    str(self.log_path),
                    "-w",
                    "-t",
                    str(int(_START_TIMEOUT_S)),
                ),
                timeout=_START_TIMEOUT_S + 10,
                what="pg_ctl start",
            )
            if res.returncode == 0:
                self.port = port
                return
            log_tail = _tail(self.log_path)
            last_error = f"{res.stdout}\n{res.stderr}".strip() + "\n--- server log tail ---\n"
            last_error += log_tail
            if "Address already in use" not in log_tail:
                break
            # Lost the race for the port to another process: try another one.
        raise PostgresUnavailable(f"could not start PostgreSQL:\n{last_error}")

    def _wait_until_connectable(self) -> None:
        # pg_ctl -w already waited for "ready", but confirm that a real client
        # gets in over TCP before handing the cluster out.
        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:
            try:
                with self._connect("postgres", connect_timeout=2):
                    return
            except psycopg.OperationalError as exc:
                if time.monotonic() >= deadline:
                    raise PostgresUnavailable(
                        f"PostgreSQL on {self.host}:{self.port} accepted no connection"
                        f" within {_START_TIMEOUT_S:.0f} s: {exc}\n--- server log tail ---\n"
                        + _tail(self.log_path)
                    ) from exc
            time.sleep(0.1)

    # -------------------------------------------------------------- databases

    def _connect(
        self, dbname: str, connect_timeout: int = 10
    ) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(
            host=self.host,
            port=self.port,
            user=_SUPERUSER,
            dbname=dbname,
            autocommit=True,  # CREATE/DROP DATABASE cannot run inside a transaction
            connect_timeout=connect_timeout,
        )

    def url(self, dbname: str = "postgres") -> str:
        """SQLAlchemy URL for ``dbname``: ``postgresql+psycopg://postgres@127.0.0.1:PORT/dbname``."""
        return f"postgresql+psycopg://{_SUPERUSER}@{self.host}:{self.port}/{dbname}"

    def create_database(self, name: str | None = None) -> str:
        """Create a database and return its SQLAlchemy URL.

        ``name`` must be a lowercase identifier (``[a-z_][a-z0-9_]*``, at most
        63 characters); when omitted a unique random name is used.

        Raises:
            ValueError: ``name`` is not a valid identifier.
        """
        if name is None:
            name = f"memsync_test_{secrets.token_hex(6)}"
        self._validate_name(name)
        with self._connect("postgres") as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop database ``name``, terminating any sessions still connected to it.

        Raises:
            ValueError: ``name`` is not a valid identifier.
        """
        self._validate_name(name)
        with self._connect("postgres") as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    @staticmethod
    def _validate_name(name: str) -> None:
        if not _DBNAME_RE.fullmatch(name):
            raise ValueError(
                f"invalid database name {name!r}: use [a-z_][a-z0-9_]*, at most 63 characters"
            )

    # ------------------------------------------------------------------- stop

    def stop(self) -> None:
        """Stop the server immediately and delete its temp dir. Safe to call more than once."""
        if self._stopped:
            return
        self._stopped = True
        atexit.unregister(self.stop)
        try:
            if (self.data_dir / "postmaster.pid").exists():
                self._stop_server()
        finally:
            shutil.rmtree(self.base_path, ignore_errors=True)

    def _stop_server(self) -> None:
        pid = self._postmaster_pid()
        try:
            res = self._run(
                self._cmd(
                    "pg_ctl",
                    "stop",
                    "-D",
                    str(self.data_dir),
                    "-m",
                    "immediate",
                    "-w",
                    "-t",
                    str(int(_STOP_TIMEOUT_S)),
                ),
                timeout=_STOP_TIMEOUT_S + 10,
                what="pg_ctl stop",
            )
            ok = res.returncode == 0
        except PostgresUnavailable:
            ok = False
        if not ok and pid is not None:
            # Last resort, aimed only at the postmaster this cluster started
            # (its backends exit when they notice it is gone).
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def _postmaster_pid(self) -> int | None:
        try:
            first = (self.data_dir / "postmaster.pid").read_text(encoding="utf-8").split("\n", 1)[0]
            return int(first)
        except (OSError, ValueError):
            return None

    # -------------------------------------------------------- context manager

    def __enter__(self) -> Self:
        """Return the running cluster."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop the cluster (see :meth:`stop`)."""
        self.stop()

    def __repr__(self) -> str:
        """Show where the cluster listens and lives."""
        state = "stopped" if self._stopped else "running"
        return f"<PostgresCluster {self.host}:{self.port} {state} dir={self.base_path}>"
