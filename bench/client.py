"""Client benchmark: `memsync push`/`pull` against `git add/commit/push` and `git pull`.

One run on loopback, with the same tree of notes on both sides:

- a real `memsync-server serve` (SQLite in a temp dir, rate limiting off, a token from
  `memsync-server token create --repo '*'`);
- a bare git repository served by `git daemon` (`--enable=receive-pack`), cloned and
  pushed over `git://127.0.0.1`;
- in front of each server a byte-counting TCP proxy in its own process, so memsync and
  git traffic are counted the same way, at the socket (HTTP headers and git's pkt-lines
  included), and the proxy's threads never compete with an in-process library call.

The team dir holds 2,000 realistic Markdown notes of ~4 KB (`tests.scanner.corpus.
realistic_notes`) under keys like `topic-17/note-0042.md`. Each memsync row is measured
two ways: the whole CLI process (`memsync push --json` etc., run as a person runs it:
in a git checkout whose remote `origin` names the repo, with MEMSYNC_SERVER, TOKEN and
DIR set and HOME and XDG_* in a temp dir), and the library call alone (`Api` +
`Workspace.open` + `push`/`pull` + close, in this process; modules already imported).
Rows, each the median of several runs (fresh dirs, repos and state where the row needs
them), with the CLI's time over git's and the aim it is judged by:

- `first push`     2,000 notes into an empty repo (git: `add -A`, `commit`, `push`)
- `cold pull`      a fresh user fetches all 2,000 notes (git: `clone`)
- `no-op push`     nothing changed (git: `push` alone)
- `status`         nothing changed: memsync's `status` asks the server for its list of
                   checksums and checks the team index (git: `status --porcelain`)
- `1-file push`    one note edited (git: `add -A`, `commit`, `push`)
- `no-op pull`     a second user, nothing new: memsync's 304 (git: `pull --ff-only`)
- `1-file pull`    a second user, after the first pushed one edited note

The aims: first push and cold pull CLI <= git; the no-op and one-file rows CLI <= 2x
git, and a one-file row moves at most twice the file's bytes; the library <= git. With
2,000 notes the CLI's no-op push and status take under 250 ms each, and its one-file
push under 350 ms (whole processes, the team index check included).

plus reference rows for process start-up (`python -c pass`, `memsync --help`, importing
what `memsync push` imports, importing httpx; `git --version`), for git's no-op
`add -A` + `push`, and for
git's `add -A` + `commit` of one edited file (no push).

The CLI runs without `PYTHONDONTWRITEBYTECODE`, as an installed command does: its
modules' bytecode is written once (by the first, untimed run) and then loaded, not
compiled on every run.

    .venv/bin/python -m bench.client                # full run (under a minute)
    .venv/bin/python -m bench.client --quick        # 200 notes, one run per row

Only 127.0.0.1 is used. Every process started here is stopped at the end: the server
and the git daemon are checked with pgrep, the proxy processes are joined. Exit status
1 when a command failed or gave an unexpected result.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from importlib import metadata
from multiprocessing.sharedctypes import SynchronizedArray
from multiprocessing.synchronize import Event as EventType
from pathlib import Path
from typing import Any

from bench._table import markdown_table
from bench.server import _check_gone, machine, mint_token, note_key
from sync_client.api import Api
from sync_client.config import ClientConfig, resolve
from sync_client.pull import PullResult, pull
from sync_client.push import PushResult, push
from sync_client.status import status
from sync_client.workspace import Workspace
from tests.liveserver import ServerProcess, free_port, stop_process
from tests.scanner.corpus import realistic_notes

NOTE_BYTES = 4096
TEAM_REPO = "bench/team"
COMMAND_TIMEOUT = 300.0
SENT, RECEIVED, ACTIVE = 0, 1, 2
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "Bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
}

# --------------------------------------------------------------------------- proxy


def _pump(source: socket.socket, target: socket.socket, counters: Any, slot: int) -> None:
    """Copy `source` to `target` until EOF, counting bytes; then half-close `target`."""
    try:
        while True:
            data = source.recv(262_144)
            if not data:
                break
            with counters.get_lock():
                counters[slot] += len(data)
            target.sendall(data)
    except OSError:
        pass
    finally:
        with suppress(OSError):
            target.shutdown(socket.SHUT_WR)


def _relay(client: socket.socket, upstream: socket.socket, counters: Any) -> None:
    """Both directions of one connection; the connection stops counting as active at the end."""
    up = threading.Thread(target=_pump, args=(client, upstream, counters, SENT), daemon=True)
    up.start()
    _pump(upstream, client, counters, RECEIVED)
    up.join()
    client.close()
    upstream.close()
    with counters.get_lock():
        counters[ACTIVE] -= 1


def _proxy_child(target_port: int, counters: Any, stop: EventType, port_out: Any) -> None:
    """Proxy process: accept on an ephemeral 127.0.0.1 port, forward to `target_port`."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    port_out.send(listener.getsockname()[1])
    port_out.close()
    while not stop.is_set():
        try:
            client, _ = listener.accept()
        except TimeoutError:
            continue
        try:
            upstream = socket.create_connection(("127.0.0.1", target_port), timeout=10)
        except OSError:
            client.close()
            continue
        for sock in (client, upstream):
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with counters.get_lock():
            counters[ACTIVE] += 1
        threading.Thread(target=_relay, args=(client, upstream, counters), daemon=True).start()
    listener.close()


class CountingProxy:
    """A TCP proxy 127.0.0.1:port -> 127.0.0.1:target_port in its own process.

    Counts bytes each way (sent = client to server) over every connection it carries.
    """

    def __init__(self, target_port: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.counters: SynchronizedArray[int] = context.Array("q", 3)
        self._stop = context.Event()
        receiver, sender = context.Pipe(duplex=False)
        self.process = context.Process(
            target=_proxy_child,
            args=(target_port, self.counters, self._stop, sender),
            name=f"bench-proxy-{target_port}",
            daemon=True,
        )
        self.process.start()
        sender.close()
        try:
            if not receiver.poll(60):
                raise EOFError
            self.port: int = receiver.recv()
        except EOFError:
            self.stop()
            raise RuntimeError("the counting proxy did not start") from None
        finally:
            receiver.close()

    def totals(self) -> tuple[int, int]:
        """(bytes sent, bytes received) so far."""
        with self.counters.get_lock():
            return self.counters[SENT], self.counters[RECEIVED]

    def wait_idle(self, timeout: float = 10.0) -> None:
        """Wait until every connection has closed (so its last bytes are counted)."""
        deadline = time.monotonic() + timeout
        while self.counters[ACTIVE] > 0:
            if time.monotonic() > deadline:
                raise RuntimeError("a proxied connection stayed open")
            time.sleep(0.002)

    @contextmanager
    def count(self) -> Iterator[list[int]]:
        """Yield a list that holds [sent, received] for the block once it ends."""
        self.wait_idle()
        sent, received = self.totals()
        delta = [0, 0]
        yield delta
        self.wait_idle()
        sent_after, received_after = self.totals()
        delta[:] = [sent_after - sent, received_after - received]

    def stop(self) -> None:
        """Stop the proxy process (bounded)."""
        self._stop.set()
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(timeout=5)


# --------------------------------------------------------------------------- git


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    """Until 127.0.0.1:port accepts connections; RuntimeError if `process` exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        with suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


class GitDaemon:
    """`git daemon` serving every repository under `base` on 127.0.0.1."""

    def __init__(self, base: Path, port: int, log_path: Path) -> None:
        self.port = port
        self._log = log_path.open("wb")
        self.process = subprocess.Popen(
            [
                "git",
                "daemon",
                "--reuseaddr",
                f"--base-path={base}",
                "--export-all",
                "--enable=receive-pack",
                "--informative-errors",
                "--listen=127.0.0.1",
                f"--port={port}",
                str(base),
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=clean_env(),
        )
        try:
            wait_for_port(port, self.process)
        except RuntimeError:
            self.stop()
            raise

    def stop(self) -> None:
        """Terminate the daemon and wait for it (bounded)."""
        stop_process(self.process, timeout=10)
        self._log.close()


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without GIT_*, MEMSYNC_* and XDG_* variables, nor
    PYTHONDONTWRITEBYTECODE (an installed command has its bytecode), plus `extra`."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("GIT_", "MEMSYNC_", "XDG_")) and key != "PYTHONDONTWRITEBYTECODE"
    }
    env.update(extra)
    return env


def run(
    command: list[str], *, env: Mapping[str, str], cwd: Path, ok: tuple[int, ...] = (0,)
) -> str:
    """Run a command; its stdout. RuntimeError (with stderr) on an unexpected exit status."""
    done = subprocess.run(
        command,
        env=dict(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )
    if done.returncode not in ok:
        raise RuntimeError(
            f"{' '.join(command[:3])} exited {done.returncode}: {done.stderr.strip()[-1500:]}"
        )
    return done.stdout


def timed(commands: list[list[str]], *, env: Mapping[str, str], cwd: Path) -> float:
    """Milliseconds to run `commands` one after another."""
    started = time.perf_counter()
    for command in commands:
        run(command, env=env, cwd=cwd)
    return (time.perf_counter() - started) * 1000


# --------------------------------------------------------------------------- rows


@dataclass
class Row:
    """One operation: every run's milliseconds and bytes, and the aim it is judged by."""

    name: str
    aim: str  # "first", "noop", "onefile", "cold" or "" (a reference row)
    limit_ms: float | None = None  # the CLI's median must stay under this
    cli_ms: list[float] = field(default_factory=list)
    lib_ms: list[float] = field(default_factory=list)
    git_ms: list[float] = field(default_factory=list)
    cli_bytes: list[tuple[int, int]] = field(default_factory=list)
    lib_socket_bytes: list[tuple[int, int]] = field(default_factory=list)
    lib_api_bytes: list[tuple[int, int]] = field(default_factory=list)
    git_bytes: list[tuple[int, int]] = field(default_factory=list)
    file_bytes: list[int] = field(default_factory=list)


def median(values: list[float]) -> float | None:
    """The median, or None for no values."""
    return statistics.median(values) if values else None


def median_pair(pairs: list[tuple[int, int]]) -> tuple[int, int] | None:
    """Medians of each half of (sent, received) pairs."""
    if not pairs:
        return None
    return (
        round(statistics.median(p[0] for p in pairs)),
        round(statistics.median(p[1] for p in pairs)),
    )


class Bench:
    """The whole setup: directories, server, git daemon, proxies, and the measurements."""

    def __init__(self, root: Path, notes: dict[str, str], repeat: int, heavy_repeat: int) -> None:
        self.root = root
        self.notes = notes
        self.repeat = repeat
        self.heavy_repeat = heavy_repeat
        self.home = root / "home"
        self.source = root / "source"
        self.git_base = root / "git-served"
        self.rows: dict[str, Row] = {}
        self.memsync = Path(sys.executable).with_name("memsync")
        self._stack: list[Callable[[], None]] = []
        self._counter = 0

    # ---- setup and teardown

    def start(self) -> None:
        """Write the notes, start the server, the git daemon and both proxies."""
        for key, text in self.notes.items():
            path = self.source / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        for sub in ("config", "state", "cache", "data"):
            (self.home / sub).mkdir(parents=True, exist_ok=True)
        self.git_base.mkdir()

        env = {
            "MEMSYNC_DATABASE_URL": f"sqlite:///{self.root / 'server.sqlite3'}",
            "MEMSYNC_RATE_LIMIT_BURST": "0",
        }
        self.server = ServerProcess(env, log_path=self.root / "server.log")
        self._stack.append(self._stop_server)
        self.token = mint_token(env)
        self.server_proxy = CountingProxy(self.server.port)
        self._stack.append(self.server_proxy.stop)

        self.daemon = GitDaemon(self.git_base, free_port(), self.root / "git-daemon.log")
        self._stack.append(self._stop_daemon)
        self.git_proxy = CountingProxy(self.daemon.port)
        self._stack.append(self.git_proxy.stop)
        self.server_url = f"http://127.0.0.1:{self.server_proxy.port}"

    def _stop_server(self) -> None:
        self.server.stop()
        _check_gone(f"serve --port {self.server.port} ")

    def _stop_daemon(self) -> None:
        self.daemon.stop()
        _check_gone(f"--port={self.daemon.port}")

    def stop(self) -> None:
        """Stop everything started, in reverse order."""
        while self._stack:
            with suppress(Exception):
                self._stack.pop()()

    # ---- helpers

    def fresh(self, label: str) -> Path:
        """A new, not yet existing path under the root."""
        self._counter += 1
        return self.root / "dirs" / f"{label}-{self._counter}"

    def copy_source(self, label: str) -> Path:
        """A fresh copy of the pristine notes."""
        target = self.fresh(label)
        shutil.copytree(self.source, target)
        return target

    def checkout(self, repo: str) -> Path:
        """A git checkout whose `origin` names `repo`: where the CLI runs, as a person's does."""
        path = self.root / "checkouts" / repo
        if not path.exists():
            path.mkdir(parents=True)
            env = self.git_env()
            run(["git", "init", "-q", "-b", "main"], env=env, cwd=path)
            origin = f"https://git.example.invalid/{repo}.git"
            run(["git", "remote", "add", "origin", origin], env=env, cwd=path)
        return path

    def memsync_env(self, team_dir: Path) -> dict[str, str]:
        """The CLI's environment: server (through the proxy), token, dir, HOME, XDG."""
        return clean_env(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / "config"),
            XDG_STATE_HOME=str(self.home / "state"),
            XDG_CACHE_HOME=str(self.home / "cache"),
            XDG_DATA_HOME=str(self.home / "data"),
            MEMSYNC_SERVER=self.server_url,
            MEMSYNC_TOKEN=self.token,
            MEMSYNC_DIR=str(team_dir),
        )

    def config(self, team_dir: Path, repo: str) -> ClientConfig:
        """What the CLI resolves from the same environment (so the same state dir)."""
        env = self.memsync_env(team_dir)
        cwd = self.checkout(repo)
        return resolve(server=None, token=None, repo=None, team_dir=None, cwd=cwd, env=env)

    def git_env(self) -> dict[str, str]:
        """git with no system or user config, a fixed identity, no prompts."""
        return clean_env(
            HOME=str(self.home),
            GIT_CONFIG_NOSYSTEM="1",
            GIT_TERMINAL_PROMPT="0",
            LC_ALL="C",
            **GIT_IDENTITY,
        )

    def git_url(self, name: str) -> str:
        """The clone URL of `name` (through the counting proxy)."""
        return f"git://127.0.0.1:{self.git_proxy.port}/{name}.git"

    def bare_repo(self, name: str) -> None:
        """An empty bare repository served by the daemon."""
        path = self.git_base / f"{name}.git"
        run(
            ["git", "init", "-q", "--bare", "-b", "main", str(path)],
            env=self.git_env(),
            cwd=self.root,
        )

    def git_worktree(self, label: str, remote: str) -> Path:
        """A fresh copy of the notes as a new repository with `origin` = `remote`."""
        work = self.copy_source(label)
        env = self.git_env()
        run(["git", "init", "-q", "-b", "main"], env=env, cwd=work)
        run(["git", "remote", "add", "origin", self.git_url(remote)], env=env, cwd=work)
        return work

    def row(self, name: str, aim: str, limit_ms: float | None = None) -> Row:
        """The row `name`, created on first use (rows print in creation order)."""
        return self.rows.setdefault(name, Row(name, aim, limit_ms))

    # ---- memsync, both ways

    def cli(
        self, command: str, team_dir: Path, repo: str
    ) -> tuple[float, dict[str, Any], list[int]]:
        """(ms, JSON result, [sent, received]) of `memsync COMMAND --json` as a process."""
        env = self.memsync_env(team_dir)
        cwd = self.checkout(repo)
        with self.server_proxy.count() as moved:
            started = time.perf_counter()
            out = run([str(self.memsync), command, "--json"], env=env, cwd=cwd)
            elapsed = (time.perf_counter() - started) * 1000
        result: dict[str, Any] = json.loads(out)
        return elapsed, result, moved

    def library(
        self,
        action: Callable[[Workspace], PushResult | PullResult | dict[str, Any]],
        config: ClientConfig,
    ) -> tuple[float, dict[str, Any], list[int], tuple[int, int]]:
        """(ms, result, socket [sent, received], Api's own count) of one in-process call."""
        with self.server_proxy.count() as moved:
            started = time.perf_counter()
            with Api(config.server, config.token, config.repo) as api:
                workspace = Workspace.open(config.team_dir, config.state_dir, api)
                result = action(workspace)
            elapsed = (time.perf_counter() - started) * 1000
        answer = result if isinstance(result, dict) else result.as_json()
        return elapsed, answer, moved, (api.bytes_sent, api.bytes_received)

    def both(
        self,
        row: Row,
        command: str,
        cli_dir: Path,
        lib_dir: Path,
        repo: str,
        check: Callable[[dict[str, Any]], bool],
        *,
        cli_repo: str | None = None,
    ) -> None:
        """One CLI run and one library run of `command`, recorded in `row` and checked."""
        ms, result, moved = self.cli(command, cli_dir, cli_repo or repo)
        if not check(result):
            raise RuntimeError(f"{row.name}: unexpected CLI result {str(result)[:400]}")
        row.cli_ms.append(ms)
        row.cli_bytes.append((moved[0], moved[1]))
        actions: dict[str, Callable[[Workspace], PushResult | PullResult | dict[str, Any]]] = {
            "push": push,
            "pull": pull,
            "status": status,
        }
        ms, result, moved, counted = self.library(actions[command], self.config(lib_dir, repo))
        if not check(result):
            raise RuntimeError(f"{row.name}: unexpected library result {str(result)[:400]}")
        row.lib_ms.append(ms)
        row.lib_socket_bytes.append((moved[0], moved[1]))
        row.lib_api_bytes.append(counted)

    def git_timed(self, row: Row, commands: list[list[str]], cwd: Path) -> None:
        """Run git commands as one timed, byte-counted step of `row`."""
        with self.git_proxy.count() as moved:
            ms = timed(commands, env=self.git_env(), cwd=cwd)
        row.git_ms.append(ms)
        row.git_bytes.append((moved[0], moved[1]))

    # ---- scenarios

    def reference(self) -> None:
        """Process start-up costs, for reading the CLI rows."""
        env = self.memsync_env(self.source)
        # The bytecode of memsync's own packages, as an install writes it (untimed).
        checkout = Path(__file__).resolve().parent.parent
        packages = [str(checkout / name) for name in ("memsync_protocol", "scanner", "sync_client")]
        run([sys.executable, "-m", "compileall", "-q", *packages], env=env, cwd=self.root)
        python = [sys.executable, "-c", "pass"]
        imports = [
            sys.executable,
            "-c",
            "import sync_client.cli, sync_client.config, sync_client.api, sync_client.push",
        ]
        # What every command that talks to the server loads on top (httpcore loads trio
        # when it is installed, as in a checkout whose test tools pull it in).
        httpx = [sys.executable, "-c", "import httpx, httpcore"]
        for name, command in (
            ("`python -c pass` / `git --version`", python),
            ("`memsync --help`", [str(self.memsync), "--help"]),
            ("python + imports of `memsync push`", imports),
            ("python + `import httpx`", httpx),
        ):
            row = self.row(f"ref: {name}", "")
            run(command, env=env, cwd=self.root)  # warm the page cache
            for _ in range(self.repeat):
                row.cli_ms.append(timed([command], env=env, cwd=self.root))
        git_row = self.rows["ref: `python -c pass` / `git --version`"]
        for _ in range(self.repeat):
            git_row.git_ms.append(timed([["git", "--version"]], env=self.git_env(), cwd=self.root))

    def first_push(self) -> None:
        """2,000 notes into an empty repo, each run on fresh repos and fresh state."""
        row = self.row(f"first push ({len(self.notes):,} notes)", "first")
        count = len(self.notes)
        for index in range(self.heavy_repeat):
            team_dir = self.copy_source("first")
            self.both(
                row,
                "push",
                team_dir,
                team_dir,
                f"bench/first-lib-{index}",
                lambda r: len(r["uploaded"]) == count and not r["skipped"],
                cli_repo=f"bench/first-cli-{index}",
            )
            self.bare_repo(f"first-{index}")
            work = self.git_worktree("git-first", f"first-{index}")
            self.git_timed(row, self._commit_and_push("first push", upstream=True), work)

    @staticmethod
    def _commit_and_push(message: str, *, upstream: bool = False) -> list[list[str]]:
        push_command = ["git", "push", "-q", *(["-u"] if upstream else []), "origin", "main"]
        return [["git", "add", "-A"], ["git", "commit", "-q", "-m", message], push_command]

    def setup_team(self) -> None:
        """User A pushes the team repo; user B pulls it (memsync and git), untimed."""
        self.user_a = self.copy_source("a")
        config_a = self.config(self.user_a, TEAM_REPO)
        self.library(push, config_a)
        self.user_b = self.fresh("b")
        self.library(pull, self.config(self.user_b, TEAM_REPO))
        self.bare_repo("team")
        self.git_a = self.git_worktree("git-a", "team")
        for command in self._commit_and_push("seed", upstream=True):
            run(command, env=self.git_env(), cwd=self.git_a)
        self.git_b = self.fresh("git-b")
        run(
            ["git", "clone", "-q", self.git_url("team"), str(self.git_b)],
            env=self.git_env(),
            cwd=self.root,
        )

    def edit(self, team_dir: Path, key: str, tag: str) -> int:
        """Append a line to one note; its new size in bytes."""
        path = team_dir / key
        text = path.read_text(encoding="utf-8") + f"\nEdited in run {tag}.\n"
        path.write_text(text, encoding="utf-8")
        return len(text.encode("utf-8"))

    def noop_push(self) -> None:
        """Nothing changed since the last push."""
        row = self.row("no-op push", "noop", limit_ms=250)
        # memsync's push also looks for changes in the team dir; git's equivalent is `add -A`.
        with_add = self.row("ref: no-op `git add -A` + `git push`", "")
        push_command = ["git", "push", "-q", "origin", "main"]
        for _ in range(self.repeat):
            self.both(row, "push", self.user_a, self.user_a, TEAM_REPO, lambda r: not r["uploaded"])
            self.git_timed(row, [push_command], self.git_a)
            self.git_timed(with_add, [["git", "add", "-A"], push_command], self.git_a)

    def no_change_status(self) -> None:
        """`status` with nothing changed (memsync asks the server for its checksums and
        checks the team index; git compares the work tree with its index)."""
        row = self.row("status", "noop", limit_ms=250)
        for _ in range(self.repeat):
            self.both(
                row,
                "status",
                self.user_a,
                self.user_a,
                TEAM_REPO,
                lambda r: not r["new"] and not r["modified"] and r["offline"] is None,
            )
            self.git_timed(row, [["git", "status", "--porcelain"]], self.git_a)
        if importlib.util.find_spec("trio") is None:
            return
        # This checkout's test tools install trio, and httpcore imports it whenever it is
        # there (about 90 ms); an install of memsync alone has none. The same command
        # with trio hidden from the import system:
        without = self.row("ref: `status`, trio hidden (an install without dev extras)", "")
        hidden = (
            "import sys; sys.modules['trio'] = None; from sync_client.launch import main; "
            "sys.argv = ['memsync', 'status', '--json']; main()"
        )
        env, cwd = self.memsync_env(self.user_a), self.checkout(TEAM_REPO)
        for _ in range(self.repeat):
            without.cli_ms.append(timed([[sys.executable, "-c", hidden]], env=env, cwd=cwd))

    def one_file_push(self) -> None:
        """One note edited (a different one each run), then pushed."""
        row = self.row("1-file push", "onefile", limit_ms=350)
        commit_only = self.row("ref: 1-file `git add -A` + `git commit` (no push)", "")
        keys = list(self.notes)
        for index in range(self.repeat):
            key = keys[(len(keys) // 2 + index) % len(keys)]
            row.file_bytes.append(self.edit(self.user_a, key, f"{index}-cli"))
            ms, result, moved = self.cli("push", self.user_a, TEAM_REPO)
            if result["uploaded"] != [key]:
                raise RuntimeError(f"1-file push uploaded {result['uploaded'][:5]}")
            row.cli_ms.append(ms)
            row.cli_bytes.append((moved[0], moved[1]))
            self.edit(self.user_a, key, f"{index}-lib")
            ms, lib_result, moved, counted = self.library(push, self.config(self.user_a, TEAM_REPO))
            if lib_result["uploaded"] != [key]:
                raise RuntimeError(f"1-file push uploaded {lib_result['uploaded'][:5]}")
            row.lib_ms.append(ms)
            row.lib_socket_bytes.append((moved[0], moved[1]))
            row.lib_api_bytes.append(counted)
            self.edit(self.git_a, key, f"{index}-git")
            self.git_timed(row, self._commit_and_push(f"edit {index}"), self.git_a)
            self.edit(self.git_a, key, f"{index}-git-commit")
            commands = self._commit_and_push(f"commit {index}")[:2]
            self.git_timed(commit_only, commands, self.git_a)
            run(["git", "push", "-q", "origin", "main"], env=self.git_env(), cwd=self.git_a)

    def noop_pull(self) -> None:
        """User B pulls with nothing new (memsync: one 304)."""
        self.library(pull, self.config(self.user_b, TEAM_REPO))  # catch up, untimed
        run(["git", "pull", "-q", "--ff-only"], env=self.git_env(), cwd=self.git_b)
        row = self.row("no-op pull (304)", "noop")
        for _ in range(self.repeat):
            self.both(row, "pull", self.user_b, self.user_b, TEAM_REPO, lambda r: r["not_modified"])
            self.git_timed(row, [["git", "pull", "-q", "--ff-only"]], self.git_b)

    def one_file_pull(self) -> None:
        """User A pushes one edited note (untimed); user B pulls it."""
        row = self.row("1-file pull", "onefile")
        keys = list(self.notes)
        config_a = self.config(self.user_a, TEAM_REPO)
        for index in range(self.repeat):
            key = keys[(len(keys) // 4 + index) % len(keys)]
            row.file_bytes.append(self.edit(self.user_a, key, f"{index}-pull-cli"))
            self.library(push, config_a)
            ms, result, moved = self.cli("pull", self.user_b, TEAM_REPO)
            if result["written"] != [key]:
                raise RuntimeError(f"1-file pull wrote {result['written'][:5]}")
            row.cli_ms.append(ms)
            row.cli_bytes.append((moved[0], moved[1]))
            self.edit(self.user_a, key, f"{index}-pull-lib")
            self.library(push, config_a)
            ms, lib_result, moved, counted = self.library(pull, self.config(self.user_b, TEAM_REPO))
            if lib_result["written"] != [key]:
                raise RuntimeError(f"1-file pull wrote {lib_result['written'][:5]}")
            row.lib_ms.append(ms)
            row.lib_socket_bytes.append((moved[0], moved[1]))
            row.lib_api_bytes.append(counted)
            self.edit(self.git_a, key, f"{index}-pull")
            for command in self._commit_and_push(f"pull edit {index}"):
                run(command, env=self.git_env(), cwd=self.git_a)
            self.git_timed(row, [["git", "pull", "-q", "--ff-only"]], self.git_b)

    def cold_pull(self) -> None:
        """A fresh user (empty team dir, no state) pulls all the notes."""
        row = self.row(f"cold pull ({len(self.notes):,} notes)", "cold")
        count = len(self.notes)
        for _ in range(self.heavy_repeat):
            self.both(
                row,
                "pull",
                self.fresh("cold-cli"),
                self.fresh("cold-lib"),
                TEAM_REPO,
                lambda r: len(r["written"]) == count,
            )
            target = self.fresh("git-cold")
            self.git_timed(
                row, [["git", "clone", "-q", self.git_url("team"), str(target)]], self.root
            )


# --------------------------------------------------------------------------- report


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


def _bytes(pair: tuple[int, int] | None) -> str:
    return "" if pair is None else f"{pair[0]:,} / {pair[1]:,}"


def _ratio(mine: float | None, git: float | None) -> float | None:
    return None if mine is None or git is None or git == 0 else mine / git


def aim(row: Row) -> str:
    """The row judged against the issue's aims (the CLI / git ratio is its own column)."""
    cli, lib, git = median(row.cli_ms), median(row.lib_ms), median(row.git_ms)
    checks: list[tuple[str, bool, str]] = []
    cli_ratio = _ratio(cli, git)
    if row.limit_ms is not None and cli is not None:
        checks.append((f"CLI < {row.limit_ms:.0f} ms", cli < row.limit_ms, ""))
    if row.aim in ("noop", "onefile") and cli_ratio is not None:
        checks.append(("CLI <= 2x git", cli_ratio <= 2.0, ""))
    if row.aim in ("first", "cold") and cli_ratio is not None:
        checks.append(("CLI <= git", cli_ratio <= 1.0, ""))
    lib_ratio = _ratio(lib, git)
    if row.aim and lib_ratio is not None:
        checks.append(("lib <= git", lib_ratio <= 1.0, f" ({lib_ratio:.2f}x)"))
    moved = median_pair(row.cli_bytes)
    if row.aim == "onefile" and moved is not None and row.file_bytes:
        size = statistics.median(row.file_bytes)
        total = moved[0] + moved[1]
        checks.append(("bytes <= 2x file", total <= 2 * size, f" ({total / size:.2f}x)"))
    return "; ".join(f"{name}: {'met' if ok else 'MISSED'}{why}" for name, ok, why in checks)


# The table's order: the heavy rows, then the everyday ones, then the references.
ROW_ORDER = (
    "first push",
    "cold pull",
    "no-op push",
    "status",
    "1-file push",
    "no-op pull",
    "1-file pull",
)


def ordered(rows: list[Row]) -> list[Row]:
    """`rows` in `ROW_ORDER`, reference rows last (in the order they were made)."""

    def rank(row: Row) -> int:
        for index, prefix in enumerate(ROW_ORDER):
            if row.name.startswith(prefix):
                return index
        return len(ROW_ORDER)

    return sorted(rows, key=rank)


def table(rows: list[Row]) -> str:
    """The result table as aligned Markdown."""
    header = [
        "operation",
        "memsync CLI ms",
        "memsync library ms",
        "git ms",
        "CLI / git",
        "aim",
        "memsync bytes sent / received",
        "git bytes sent / received",
    ]
    lines = [header]
    for row in ordered(rows):
        ratio = _ratio(median(row.cli_ms), median(row.git_ms))
        lines.append(
            [
                row.name,
                _ms(median(row.cli_ms)),
                _ms(median(row.lib_ms)),
                _ms(median(row.git_ms)),
                "" if ratio is None or not row.aim else f"{ratio:.2f}x",
                aim(row),
                _bytes(median_pair(row.cli_bytes)),
                _bytes(median_pair(row.git_bytes)),
            ]
        )
    return markdown_table(lines, {1, 2, 3, 4, 6, 7})


def spread(rows: list[Row]) -> str:
    """Every run's milliseconds, for judging the medians."""
    out = []
    for row in ordered(rows):
        parts = []
        for label, values in (("CLI", row.cli_ms), ("lib", row.lib_ms), ("git", row.git_ms)):
            if values:
                parts.append(f"{label} " + " ".join(f"{v:.0f}" for v in values))
        socket_lib = median_pair(row.lib_socket_bytes)
        if socket_lib is not None:
            parts.append(f"library socket bytes {_bytes(socket_lib)}")
        api_lib = median_pair(row.lib_api_bytes)
        if api_lib is not None:
            parts.append(f"library bytes (Api count) {_bytes(api_lib)}")
        if len({pair for pair in row.cli_bytes}) > 1:
            parts.append("CLI bytes per run " + ", ".join(_bytes(p) for p in row.cli_bytes))
        out.append(f"- {row.name}: " + "; ".join(parts))
    return "\n".join(out)


def _output(command: list[str], cwd: Path | None = None) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False, cwd=cwd)
    return done.stdout.strip()


def facts() -> str:
    """The machine facts line: CPU, OS, Python, library and git versions, memsync's commit."""
    checkout = Path(__file__).resolve().parent.parent
    commit = _output(["git", "rev-parse", "--short", "HEAD"], checkout) or "unknown"
    changed = _output(["git", "status", "--porcelain", "--untracked-files=no"], checkout)
    dirty = f" + uncommitted changes in {len(changed.splitlines())} file(s)" if changed else ""
    return (
        f"{machine()}; click {metadata.version('click')}; {_output(['git', '--version'])}; "
        f"memsync at {commit}{dirty}"
    )


def main(argv: list[str] | None = None) -> int:
    """Parse options, run every scenario, print the table; 1 when something failed."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.client",
        description="Benchmark the memsync client against git on loopback.",
    )
    parser.add_argument("--quick", action="store_true", help="200 notes, one run per row")
    parser.add_argument("--notes", type=int, help="notes in the team dir (default 2000)")
    parser.add_argument("--repeat", type=int, help="runs of the cheap rows (default 5)")
    parser.add_argument(
        "--heavy-repeat", type=int, help="runs of first push and cold pull (default 3)"
    )
    args = parser.parse_args(argv)
    count = args.notes or (200 if args.quick else 2000)
    repeat = args.repeat or (1 if args.quick else 5)
    heavy = args.heavy_repeat or (1 if args.quick else 3)
    if min(count, repeat, heavy) < 1:
        parser.error("--notes, --repeat and --heavy-repeat take numbers of at least 1")

    texts = realistic_notes(count, count * NOTE_BYTES, seed=7)
    notes = {note_key(index): text for index, text in enumerate(texts)}
    sizes = [len(text.encode()) for text in texts]
    print(
        f"machine: {facts()}\n"
        f"data: {count} notes of {min(sizes)}-{max(sizes)} bytes (mean "
        f"{sum(sizes) / count:.0f}, {sum(sizes) / 1e6:.1f} MB); median of {repeat} runs "
        f"({heavy} for first push and cold pull); load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    failed = False
    with tempfile.TemporaryDirectory(prefix="memsync-bench-client-") as tmp:
        bench = Bench(Path(tmp), notes, repeat, heavy)
        try:
            bench.start()
            for step in (
                bench.reference,
                bench.first_push,
                bench.setup_team,
                bench.noop_push,
                bench.no_change_status,
                bench.one_file_push,
                bench.noop_pull,
                bench.one_file_pull,
                bench.cold_pull,
            ):
                print(f"[client] {step.__name__} ...", file=sys.stderr, flush=True)
                step()
        except (RuntimeError, subprocess.TimeoutExpired, OSError) as error:
            print(f"FAILED: {error}", file=sys.stderr)
            failed = True
        finally:
            bench.stop()
        rows = list(bench.rows.values())
    print(f"load average after: {os.getloadavg()[0]:.2f}\n")
    print(table(rows))
    print()
    print(spread(rows))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
