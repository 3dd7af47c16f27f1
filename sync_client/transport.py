"""Below HTTP: a transport failure in words, and the one place httpx's failures become ours.

Transport failures become `NetworkError`s in words (`_network_words`): "connection
refused", "timed out after 30 s", "name not resolved", "TLS handshake failed", never an
exception's class name. httpx is imported inside the functions that need it, so a command
that sends nothing never loads it.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

from sync_client.errors import NetworkError, NotAMemsyncServer

# `progress(bytes so far, Content-Length or None)` while an answer downloads.
DownloadProgress = Callable[[int, int | None], None]


def _root_causes(error: BaseException) -> Iterator[BaseException]:
    """`error` and what it was raised from, innermost last (httpx wraps httpcore, which
    wraps the socket's own error)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _host(server: str) -> str:
    """The host part of a server URL, for "name not resolved"."""
    from urllib.parse import urlsplit

    return urlsplit(server).hostname or server


def reachable(server: str, timeout: float = 1.0) -> bool:
    """Whether a TCP connection to `server`'s host and port can be made now.

    Nothing is sent: the connection is closed at once. A watcher uses this while
    nothing answers at the address, to notice the server's return without a request.
    """
    from urllib.parse import urlsplit

    parts = urlsplit(server)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return False
    if not parts.hostname:
        return False
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout):
            return True
    except OSError:
        return False


def _network_words(error: BaseException, server: str, timeout: float | None) -> str:
    """A transport failure in words, never an exception's class name.

    The cause is found in the chain httpx raises from (httpcore, then the socket's or
    the TLS layer's own error), so each case reads as what happened on the wire.
    """
    import errno
    import ssl

    import httpx

    after = f" after {timeout:g} s" if timeout else ""
    if isinstance(error, httpx.ConnectTimeout):
        return f"cannot reach {server}: the connection timed out{after}"
    if isinstance(error, httpx.TimeoutException):
        return f"{server} did not answer: timed out{after}"
    if isinstance(error, httpx.UnsupportedProtocol):
        return f"cannot reach {server}: the URL must start with http:// or https://"
    if isinstance(error, httpx.ProxyError):
        return f"cannot reach {server}: the proxy refused the connection"
    causes = list(_root_causes(error))
    for cause in causes:
        if isinstance(cause, ssl.SSLCertVerificationError):
            reason = cause.verify_message or "it could not be verified"
            return f"TLS handshake with {server} failed: the server's certificate: {reason}"
    if any(isinstance(cause, ssl.SSLError) for cause in causes):
        hint = " is this an http:// server?" if server.startswith("https://") else ""
        return f"TLS handshake with {server} failed:{hint}".rstrip(":")
    if any(isinstance(cause, ConnectionRefusedError) for cause in causes):
        return f"cannot reach {server}: connection refused (is the server running?)"
    if any(isinstance(cause, socket.gaierror) for cause in causes):
        return f"cannot reach {server}: name not resolved ({_host(server)})"
    if any(isinstance(cause, ConnectionResetError) for cause in causes):
        return f"the connection to {server} was reset"
    unreachable = {errno.ENETUNREACH: "network unreachable", errno.EHOSTUNREACH: "no route to host"}
    for cause in causes:
        if isinstance(cause, OSError) and cause.errno in unreachable:
            return f"cannot reach {server}: {unreachable[cause.errno]}"
    if isinstance(error, httpx.RemoteProtocolError):
        return f"{server} closed the connection or does not speak HTTP as expected"
    if isinstance(error, httpx.ReadError | httpx.WriteError):
        return f"the connection to {server} was lost"
    return f"cannot reach {server}: the connection failed"


def _accepted(error: BaseException) -> bool:
    """Whether something accepted the connection before it failed: a reset, a closed
    or aborted connection, a TLS handshake. httpx calls a reset that arrives while it
    sets up the socket a connect error; but a published port or a load balancer in front
    of a dead server does exactly that, and a TCP connect there always succeeds, so the
    address is not unreachable: only a request's answer can tell the server's return."""
    import ssl

    accepted = (ConnectionResetError, ConnectionAbortedError, BrokenPipeError, ssl.SSLError)
    return any(isinstance(cause, accepted) for cause in _root_causes(error))


@contextmanager
def _transport_errors(server: str, timeout: float | None = None) -> Iterator[None]:
    """Turn httpx's failures below HTTP into the failure tree (the one place that does)."""
    import httpx

    try:
        yield
    except httpx.TransportError as error:
        connect_failed = isinstance(error, httpx.ConnectError | httpx.ConnectTimeout)
        raise NetworkError(
            _network_words(error, server, timeout),
            unreachable=connect_failed and not _accepted(error),
        ) from None
    except httpx.DecodingError:
        # Content-Encoding that does not decode: whatever answered is not our server.
        raise NotAMemsyncServer(server, "an answer whose encoding does not decode") from None


def _read_counted(response: httpx.Response, progress: DownloadProgress) -> None:
    """Read a streamed answer's body, telling `progress` of the bytes so far (as sent,
    so they compare with `Content-Length`)."""
    import httpx

    length = response.headers.get("Content-Length", "")
    total = int(length) if length.isdigit() else None
    assert isinstance(response.stream, httpx.SyncByteStream)  # a sync client's
    inner: httpx.SyncByteStream = response.stream

    class Counted(httpx.SyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            done = 0
            for chunk in inner:
                done += len(chunk)
                progress(done, total)
                yield chunk

        def close(self) -> None:
            inner.close()

    response.stream = Counted()
    response.read()
