"""A real memsync server on 127.0.0.1 for tests and benchmarks.

`run_live_server` runs uvicorn in a thread of the test process (real sockets, real
HTTP); `ServerProcess` runs `memsync-server serve` as a separate process, for tests
of the CLI and of several processes sharing one database. Both wait for readiness in
bounded loops and stop by themselves.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvicorn

from sync_server.app import create_app
from sync_server.auth import issue_token
from sync_server.config import Settings
from sync_server.events import SHUTDOWN_GRACE_SECONDS
from sync_server.storage.sql import SqlStore

READY_TIMEOUT = 30.0


@dataclass
class LiveServer:
    """A running server: its base URL and the store behind it."""

    base_url: str
    store: SqlStore
    settings: Settings

    def token(
        self,
        repo_pattern: str = "*",
        *,
        read_only: bool = False,
        name: str | None = None,
        reviewer: bool = False,
        person: str | None = None,
    ) -> str:
        """Mint a token straight into the server's store (unnamed: `token-<id>`).

        Two live tokens may not share a name, so a test that mints several gives each
        its own name or none.
        """
        _, secret = issue_token(
            self.store,
            repo_pattern=repo_pattern,
            read_only=read_only,
            name=name,
            reviewer=reviewer,
            person=person,
        )
        return secret

    def client(self, token: str | None = None) -> httpx.Client:
        """An httpx client for this server, with the bearer token when given."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=30.0)


@contextmanager
def run_live_server(settings: Settings, port: int = 0) -> Iterator[LiveServer]:
    """Serve `create_app(settings)` with uvicorn on a loopback port (0: an ephemeral
    one; a given one lets a test restart "the same" server)."""
    store = SqlStore(settings.database_url)
    store.migrate()
    app = create_app(settings, store=store)
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn-live-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + READY_TIMEOUT
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError("the live server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield LiveServer(base_url=f"http://127.0.0.1:{port}", store=store, settings=settings)
    finally:
        server.should_exit = True
        thread.join(timeout=READY_TIMEOUT)


def free_port() -> int:
    """A port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def server_command() -> list[str]:
    """`memsync-server` from this environment (the venv's console script)."""
    script = Path(sys.executable).with_name("memsync-server")
    return [str(script)] if script.exists() else [sys.executable, "-m", "sync_server"]


def stop_process(process: subprocess.Popen[bytes], timeout: float = 15) -> None:
    """Terminate a child and wait for it; kill it if it does not stop in `timeout`."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout)


class ServerProcess:
    """`memsync-server serve` in its own process, with its own environment."""

    def __init__(
        self,
        env: Mapping[str, str],
        *,
        log_path: Path,
        workers: int = 1,
        args: Sequence[str] = (),
        port: int | None = None,
    ) -> None:
        """`port`: a given one (the same server again after a stop), else a free one."""
        self.port = port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._log = log_path.open("wb")
        full_env = {**os.environ, **env}
        command = [*server_command(), "serve", "--port", str(self.port)]
        self.process = subprocess.Popen(
            [*command, "--workers", str(workers), *args],
            env=full_env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        self.log_path = log_path
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                if httpx.get(f"{self.base_url}/readyz", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"server did not start:\n{self.log_path.read_text()[-2000:]}")

    def stop(self) -> None:
        """Terminate the server and wait for it (bounded)."""
        stop_process(self.process)
        self._log.close()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()
