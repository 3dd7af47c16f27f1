"""The compose deployment: every server setting reaches the servers, the image holds
every package, and the check script behaves as CI needs (fails there when docker-compose
is missing, skips elsewhere)."""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from sync_server.config import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = (ROOT / "docker-compose.yml").read_text(encoding="utf-8")


@pytest.mark.parametrize("field", sorted(Settings.model_fields))
def test_every_setting_is_passed_to_the_servers(field: str) -> None:
    assert f"\n  MEMSYNC_{field.upper()}:" in COMPOSE


def compose_trusted_proxy() -> str:
    """The one address docker-compose.yml's servers trust forwarded headers from (its
    default), checked to be the proxy's own, inside the compose network."""
    default = r'"\$\{%s:-([0-9a-f.:/]+)\}"'
    trusted = re.findall(r"\n  FORWARDED_ALLOW_IPS: " + default % "MEMSYNC_PROXY_ADDRESS", COMPOSE)
    proxy = re.findall(r"ipv4_address: " + default % "MEMSYNC_PROXY_ADDRESS", COMPOSE)
    subnet = re.findall(r"subnet: " + default % "MEMSYNC_NETWORK_SUBNET", COMPOSE)
    assert len(trusted) == len(proxy) == len(subnet) == 1
    assert trusted == proxy
    assert ipaddress.ip_address(proxy[0]) in ipaddress.ip_network(subnet[0])
    return str(trusted[0])


def test_the_servers_trust_forwarded_headers_from_the_proxy_alone() -> None:
    assert compose_trusted_proxy() == "172.30.87.254"
    assert COMPOSE.count("FORWARDED_ALLOW_IPS:") == 1
    assert '"*"' not in COMPOSE


def test_the_image_builds_from_every_package_of_the_distribution() -> None:
    # A package the Dockerfile does not copy is missing from the image's wheel, and the
    # server dies on its first import there.
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {pattern.rstrip("*") for pattern in patterns}
    assert "memsync_protocol" in packages
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    for package in sorted(packages):
        assert f"\nCOPY {package} {package}\n" in dockerfile, package


def _check(path: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/bash", str(ROOT / "scripts" / "check-compose")],
        env={"PATH": path, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_check_compose_without_docker_compose(tmp_path: Path) -> None:
    (tmp_path / "dirname").symlink_to(shutil.which("dirname") or "/usr/bin/dirname")
    skipped = _check(str(tmp_path))
    assert skipped.returncode == 0
    assert "skipping" in skipped.stderr
    failed = _check(str(tmp_path), CI="true")
    assert failed.returncode == 1
    assert "not installed" in failed.stderr


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose not installed")
def test_check_compose_validates_the_file() -> None:
    result = _check(os.environ.get("PATH", ""), CI="true")
    assert result.returncode == 0, result.stderr
    assert "docker-compose.yml is valid" in result.stdout


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl not installed")
def test_make_certs_gives_a_certificate_clients_trust_through_the_ca(tmp_path: Path) -> None:
    import ssl
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    import httpx

    deploy = tmp_path / "deploy"
    deploy.mkdir()
    shutil.copy(ROOT / "deploy" / "make-certs", deploy / "make-certs")
    made = subprocess.run(
        [str(deploy / "make-certs"), "localhost", "memsync.internal"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    certs = deploy / "certs"
    assert (certs / "server.key").stat().st_mode & 0o077 == 0
    assert (certs / "ca.key").stat().st_mode & 0o077 == 0

    class Hello(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *_args: object) -> None:
            return

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs / "server.crt", certs / "server.key")
    server = HTTPServer(("127.0.0.1", 0), Hello)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        trusted = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        for host in ("localhost", "127.0.0.1"):
            answer = httpx.get(f"https://{host}:{port}/", verify=trusted, timeout=10)
            assert answer.text == "ok"
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"https://localhost:{port}/", timeout=10)  # not in the system store
        # A second run reuses the CA: clients keep trusting new server certificates.
        ca_before = (certs / "ca.crt").read_bytes()
        again = subprocess.run([str(deploy / "make-certs")], capture_output=True, timeout=120)
        assert again.returncode == 0
        assert (certs / "ca.crt").read_bytes() == ca_before
    finally:
        server.shutdown()
        server.server_close()
