"""Watcher benchmark: edit-to-teammate latency, idle requests, memory of 20 repos.

One run on loopback, against a real `memsync-server serve` (SQLite in a temp dir, rate
limiting off, a token from `memsync-server token create --repo '*'`):

- **latency**: two `memsync watch` processes, machine A and machine B (own HOME, state
  and team dir each), one server. A note is written into A's team dir; the clock stops
  when B's file holds the new text. Median and p99 over N edits (50), once with the
  events stream (when the server has one) and once with the events path refused by a
  proxy in front of the server, so B polls (`--poll-interval`, 5 s here so the run stays
  short; the default 30 s adds 15 s on average). The debounce is the default, 2 s:
  every latency includes it by design.
- **idle requests per hour**: one watcher with nothing to do, every request counted at
  a proxy in front of the server for a window, scaled to an hour; with the stream, and
  with the default 30 s poll against a server without the stream (the proxy answers
  404 for it, as a server before the events stream does).
- **recovery after an outage**: two watchers on a server of their own; the server is
  stopped, A writes a note, and after `--outage` seconds (300; 30 with `--quick`) the
  same server starts again on the same port. The clock runs from its first answer to
  `/readyz` until B's file holds the note. A's failed attempts during the outage are
  counted from its log (each is one "failed" line).
- **RSS of 20 repos**: one `memsync watch --all` serving 20 enrolled repos of 50 notes
  each, after all of them synced (`VmRSS` of the process).

    .venv/bin/python -m bench.watch            # full run (about 16 minutes)
    .venv/bin/python -m bench.watch --quick    # 8 edits, short windows (about 2 minutes)

Only 127.0.0.1 is used; every process started here is stopped at the end (checked with
pgrep). Exit status 1 when an edit did not arrive.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path

import httpx

from bench._table import markdown_table
from bench.client import clean_env, run
from bench.server import _check_gone, machine, mint_token
from tests.integration.watchkit import Proxy, WatchProcess, memsync_command, wait_until
from tests.liveserver import ServerProcess

DEBOUNCE = 2.0
POLL_FOR_LATENCY = 5.0
DEFAULT_POLL = 30.0
AIM_IDLE_PER_HOUR = 150
AIM_RSS_MB = 80
AIM_EXTRA_MS = 300


class Bench:
    """The server, the proxies and the machines of one run."""

    def __init__(self, root: Path, stack: ExitStack) -> None:
        self.root = root
        self.stack = stack
        env = {
            "MEMSYNC_DATABASE_URL": f"sqlite:///{root / 'server.sqlite3'}",
            "MEMSYNC_RATE_LIMIT_BURST": "0",
        }
        self.server = ServerProcess(env, log_path=root / "server.log")
        stack.callback(lambda: _check_gone(f"serve --port {self.server.port} "))
        stack.callback(self.server.stop)
        self.token = mint_token(env)
        self.has_events = self._server_has_events()

    def _server_has_events(self) -> bool:
        """Whether the server answers the events path with a stream (it is left out of
        the OpenAPI schema, a stream never ends)."""
        with httpx.stream(
            "GET",
            f"{self.server.base_url}/v1/team_memory/events",
            params={"repo": "bench/probe"},
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=30,
        ) as response:
            kind = response.headers.get("Content-Type", "")
            return response.status_code == 200 and kind.startswith("text/event-stream")

    def proxy(self, *, block_events: bool) -> Proxy:
        """A counting proxy in front of the server (refusing the stream when asked)."""
        proxy = Proxy(self.server.base_url)
        proxy.control.block_events = block_events
        self.stack.callback(proxy.close)
        return proxy

    def machine(self, name: str, server: str, repo: str = "bench/watch") -> dict[str, str]:
        """The environment of one machine: its own HOME, config, state and team dir."""
        home = self.root / name
        (home / "team").mkdir(parents=True, exist_ok=True)
        return clean_env(
            HOME=str(home),
            XDG_CONFIG_HOME=str(home / ".config"),
            XDG_STATE_HOME=str(home / ".state"),
            MEMSYNC_SERVER=server,
            MEMSYNC_TOKEN=self.token,
            MEMSYNC_REPO=repo,
            MEMSYNC_DIR=str(home / "team"),
        )

    def watch(self, env: dict[str, str], *args: str) -> WatchProcess:
        """Start `memsync watch`; stopped (SIGTERM) when the run ends."""
        process = WatchProcess(env, Path(env["HOME"]), *args)
        self.stack.callback(process.kill)
        return process


def _settled(env: dict[str, str], count: int = 1) -> Callable[[], bool]:
    """True once `count` repos of this machine's watcher pulled at least once."""

    def check() -> bool:
        states = list((Path(env["XDG_STATE_HOME"]) / "memsync").glob("*/watch.json"))
        pulled = 0
        for path in states:
            with suppress(OSError, ValueError):
                pulled += bool(json.loads(path.read_text()).get("last_pull"))
        return pulled >= count

    return check


def percentile(values: list[float], fraction: float) -> float:
    """The `fraction` quantile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered) + 0.5) - 1))]


def latency(bench: Bench, label: str, edits: int, *, stream: bool) -> list[float] | None:
    """Seconds from a write on A to the text on B, `edits` times; None when skipped."""
    if stream and not bench.has_events:
        return None
    proxy = bench.proxy(block_events=not stream)
    args = ("--debounce", str(DEBOUNCE), "--poll-interval", str(POLL_FOR_LATENCY))
    repo = f"bench/{label}"
    env_a = bench.machine(f"{label}-a", proxy.url, repo)
    env_b = bench.machine(f"{label}-b", proxy.url, repo)
    watchers = [bench.watch(env_a, *args), bench.watch(env_b, *args)]
    for env in (env_a, env_b):
        if not wait_until(_settled(env), timeout=30):
            raise RuntimeError(f"{label}: a watcher did not start: {watchers[0].log()[-500:]}")
    team_a, team_b = Path(env_a["MEMSYNC_DIR"]), Path(env_b["MEMSYNC_DIR"])
    seconds: list[float] = []
    pauses = random.Random(8)  # the same pauses every run
    for index in range(edits):
        key = f"notes/edit-{index % 5}.md"
        text = f"# Edit {index}\n\nWritten on machine A at {time.time():.3f}.\n"
        target = team_b / key
        started = time.monotonic()
        source = team_a / key
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(text, encoding="utf-8")

        def arrived(target: Path = target, text: str = text) -> bool:
            try:
                return target.read_text(encoding="utf-8") == text
            except OSError:
                return False

        if not wait_until(arrived, timeout=DEBOUNCE + POLL_FOR_LATENCY + 20):
            raise RuntimeError(f"{label}: edit {index} did not arrive on B")
        seconds.append(time.monotonic() - started)
        # B's own pull settles; a random pause keeps the edits out of step with B's poll.
        time.sleep(pauses.uniform(0.2, 0.2 + POLL_FOR_LATENCY))
    for watcher in watchers:
        watcher.terminate()
    return seconds


def idle_requests(bench: Bench, label: str, window: float, *, stream: bool) -> float | None:
    """Requests per hour of a watcher with nothing to do, counted for `window` seconds."""
    if stream and not bench.has_events:
        return None
    proxy = bench.proxy(block_events=not stream)
    proxy.control.events_status = 404  # a server without the stream: asked every 15 min
    env = bench.machine(f"idle-{label}", proxy.url, f"bench/idle-{label}")
    team = Path(env["MEMSYNC_DIR"])
    for index in range(20):
        (team / f"note-{index}.md").write_text(f"note {index}\n", encoding="utf-8")
    watcher = bench.watch(env, "--poll-interval", str(DEFAULT_POLL))
    if not wait_until(_settled(env), timeout=30):
        raise RuntimeError(f"idle {label}: the watcher did not start")
    time.sleep(DEBOUNCE + 3)  # the first push is done
    mark = proxy.control.mark()
    time.sleep(window)
    count = proxy.control.count(since=mark)
    watcher.terminate()
    return count * 3600.0 / window


def recovery(bench: Bench, outage: float) -> tuple[float, int]:
    """Seconds from a server's return after `outage` seconds away until the teammate
    has a note written meanwhile; and how often the writer tried during the outage."""
    env = {
        "MEMSYNC_DATABASE_URL": f"sqlite:///{bench.root / 'outage.sqlite3'}",
        "MEMSYNC_RATE_LIMIT_BURST": "0",
    }
    server = ServerProcess(env, log_path=bench.root / "outage-1.log")
    port = server.port
    bench.stack.callback(lambda: _check_gone(f"serve --port {port} "))
    bench.stack.callback(server.stop)
    url = server.base_url
    token = mint_token(env)
    env_a = bench.machine("outage-a", url, "bench/outage")
    env_b = bench.machine("outage-b", url, "bench/outage")
    env_a["MEMSYNC_TOKEN"] = env_b["MEMSYNC_TOKEN"] = token
    watchers = [bench.watch(env_a), bench.watch(env_b)]
    for machine_env in (env_a, env_b):
        if not wait_until(_settled(machine_env), timeout=30):
            raise RuntimeError(f"outage: a watcher did not start: {watchers[0].log()[-500:]}")
    time.sleep(DEBOUNCE + 1)
    server.stop()
    text = "# Written during the outage\n\nIt must reach B once the server is back.\n"
    (Path(env_a["MEMSYNC_DIR"]) / "outage.md").write_text(text, encoding="utf-8")
    time.sleep(outage)
    attempts = watchers[0].log().count(" failed (")
    server = ServerProcess(env, log_path=bench.root / "outage-2.log", port=port)
    bench.stack.callback(server.stop)
    back = time.monotonic()  # ServerProcess returns once /readyz answers
    target = Path(env_b["MEMSYNC_DIR"]) / "outage.md"

    def arrived() -> bool:
        try:
            return target.read_text(encoding="utf-8") == text
        except OSError:
            return False

    if not wait_until(arrived, timeout=120):
        raise RuntimeError(f"outage: the note did not reach B: {watchers[1].log()[-800:]}")
    seconds = time.monotonic() - back
    for watcher in watchers:
        watcher.terminate()
    server.stop()
    return seconds, attempts


def rss_of_many(bench: Bench, repos: int, notes: int) -> float:
    """MB of RSS of one `watch --all` serving `repos` enrolled repos."""
    env = bench.machine("many", bench.server.base_url)
    for name in ("MEMSYNC_REPO", "MEMSYNC_DIR"):
        env.pop(name)
    home = Path(env["HOME"])
    for number in range(repos):
        team = home / f"team-{number:02}"
        team.mkdir(parents=True)
        for index in range(notes):
            (team / f"topic-{index % 5}" / f"note-{index:03}.md").parent.mkdir(exist_ok=True)
            (team / f"topic-{index % 5}" / f"note-{index:03}.md").write_text(
                f"# Note {index} of repo {number}\n\n" + "A sentence of memory. " * 40 + "\n",
                encoding="utf-8",
            )
        run(
            [*memsync_command(), "enable", "--repo", f"bench/many-{number:02}", "--dir", str(team)],
            env=env,
            cwd=home,
        )
    watcher = bench.watch(env, "--all")
    if not wait_until(_settled(env, repos), timeout=120):
        raise RuntimeError(f"watch --all did not sync {repos} repos: {watcher.log()[-800:]}")
    time.sleep(DEBOUNCE + 3)  # every first push is done
    status = Path(f"/proc/{watcher.process.pid}/status").read_text()
    kilobytes = next(
        int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS")
    )
    watcher.terminate()
    return kilobytes / 1024


@contextmanager
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="memsync-bench-watch-") as folder:
        yield Path(folder)


def _ms(value: float) -> str:
    return f"{value * 1000:,.0f} ms"


def main(argv: list[str] | None = None) -> int:
    """Run everything, print one table; exit 1 when something did not work."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="8 edits, short idle windows")
    parser.add_argument("--edits", type=int, default=None)
    parser.add_argument("--outage", type=float, default=None, help="seconds (default 300)")
    options = parser.parse_args(argv)
    edits = options.edits or (8 if options.quick else 50)
    outage = options.outage or (30.0 if options.quick else 300.0)
    window = 40.0 if options.quick else 120.0
    with workdir() as root, ExitStack() as stack:
        bench = Bench(root, stack)
        try:
            with_events = latency(bench, "events", edits, stream=True)
            with_poll = latency(bench, "poll", edits, stream=False)
            idle_events = idle_requests(bench, "events", window, stream=True)
            idle_poll = idle_requests(bench, "poll", window, stream=False)
            healed, attempts = recovery(bench, outage)
            rss = rss_of_many(bench, 20, 50)
        except RuntimeError as error:
            print(f"bench.watch: {error}", file=sys.stderr)
            return 1
    missing = "n/a (the server has no events stream)"
    lines = [["measure", "result", "aim"]]
    for label, values, aim in (
        ("latency A to B, events stream", with_events, f"median < {_ms(DEBOUNCE + 0.3)}"),
        (f"latency A to B, poll every {POLL_FOR_LATENCY:g} s", with_poll, "-"),
    ):
        if values is None:
            lines.append([label, missing, aim])
        else:
            median, p99 = statistics.median(values), percentile(values, 0.99)
            lines.append(
                [label, f"median {_ms(median)}, p99 {_ms(p99)} ({len(values)} edits)", aim]
            )
    for label, rate in (
        ("idle requests per hour, events stream", idle_events),
        (f"idle requests per hour, poll every {DEFAULT_POLL:g} s", idle_poll),
    ):
        shown = missing if rate is None else f"{rate:,.0f} (counted over {window:g} s)"
        lines.append([label, shown, f"< {AIM_IDLE_PER_HOUR}"])
    lines.append(
        [
            f"teammate has a note written during a {outage:g} s outage, from the server's return",
            f"{healed * 1000:,.0f} ms (the writer tried {attempts} times while it was away)",
            f"< {_ms(DEBOUNCE + 2.0)}",
        ]
    )
    lines.append(
        ["RSS of `watch --all`, 20 repos x 50 notes", f"{rss:.1f} MB", f"< {AIM_RSS_MB} MB"]
    )
    print(f"memsync watch benchmark on {machine()}; debounce {DEBOUNCE:g} s\n")
    print(markdown_table(lines, numeric=set()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
