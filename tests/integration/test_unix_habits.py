"""Failures in words and the habits of a Unix tool: a closed pipe ends quietly, Ctrl-C
stops with exit 130, and a network failure is named, never an exception's class."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.integration.users import User
from tests.liveserver import LiveServer

CLASS_NAMES = ("ConnectError", "ConnectTimeout", "ReadTimeout", "TransportError", "SSLError")


def test_a_refused_connection_is_named(alice: User) -> None:
    alice.env["MEMSYNC_SERVER"] = "http://127.0.0.1:9"
    result = alice.run("pull")
    assert result.returncode == 1
    assert result.stderr == (
        "memsync: cannot reach http://127.0.0.1:9: connection refused (is the server running?)\n"
    )


def test_https_to_a_plain_http_server_says_so(alice: User, live: LiveServer) -> None:
    alice.env["MEMSYNC_SERVER"] = live.base_url.replace("http://", "https://")
    result = alice.run("pull")
    assert result.returncode == 1
    assert "TLS handshake with https://127.0.0.1:" in result.stderr
    assert "is this an http:// server?" in result.stderr
    assert not any(name in result.stderr for name in CLASS_NAMES)
    assert len(result.stderr.splitlines()) == 1


def test_a_pipe_closed_early_ends_quietly(alice: User) -> None:
    # More output than a pipe holds, so the writer meets the closed end.
    lines = [f"line {number} of a long note\n" for number in range(6000)]
    alice.write("long.md", "".join(lines))
    assert alice.run("push").returncode == 0
    alice.write("long.md", "".join(line.upper() for line in lines))
    memsync = str(Path(sys.executable).with_name("memsync"))
    shell = subprocess.run(
        ["bash", "-c", f'"{memsync}" diff | head -1; echo "status=${{PIPESTATUS[0]}}"'],
        env=alice.env,
        cwd=alice.home,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shell.stdout.splitlines()[0] == "== long.md: local against base"
    assert shell.stdout.splitlines()[-1] == "status=141"
    assert shell.stderr == ""


def test_ctrl_c_stops_cleanly_with_exit_130(alice: User, silent_server: str) -> None:
    memsync = str(Path(sys.executable).with_name("memsync"))
    env = {**alice.env, "MEMSYNC_SERVER": silent_server}
    process = subprocess.Popen(
        [memsync, "pull"],
        env=env,
        cwd=alice.home,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.5)  # waiting for an answer that never comes
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=15)
    assert process.returncode == 130
    assert stderr == "memsync: interrupted: wrote 0 files; run `memsync pull` again to finish\n"
    assert stdout == ""
