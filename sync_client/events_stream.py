"""The repo's events stream: server-sent `commit` events, read line by line.

Events are hints (a pull finds the truth), so an event that does not parse is skipped.
`EventStream` is what `Api.events` opens; the watcher follows the server with it and
closes it from another thread.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

from sync_client.errors import NetworkError
from sync_client.review.wire import ProposalEvent, ReviewEvent, proposal_event, review_event
from sync_client.transport import _transport_errors


class EventsUnsupported(Exception):
    """The server has no events stream (404, 405, or not `text/event-stream`): poll."""


@dataclass(frozen=True)
class CommitEvent:
    """One event of the stream: the repo's head after a commit."""

    version: int
    checksum: str


def parse_events(lines: Iterator[str]) -> Iterator[CommitEvent | ProposalEvent | ReviewEvent]:
    """The `commit` (and `proposal` and `review`) events of a server-sent events stream,
    line by line.

    Follows the SSE framing: `field: value` lines (one optional space after the
    colon), `:` comments (keep-alives), a blank line ends an event, several `data`
    lines join with newlines. An event whose data is not `{"version": int,
    "checksum": str}` is skipped: events are hints, and a pull finds the truth.
    """
    event_type = "message"
    data: list[str] = []
    for raw_line in lines:
        line = raw_line.rstrip("\r\n")
        if not line:
            if data and event_type in ("commit", "message"):
                event = _commit_event("\n".join(data))
                if event is not None:
                    yield event
            elif data and event_type == "proposal":
                proposal = proposal_event("\n".join(data))
                if proposal is not None:
                    yield proposal
            elif data and event_type == "review":
                review = review_event("\n".join(data))
                if review is not None:
                    yield review
            event_type, data = "message", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            event_type = value
        elif name == "data":
            data.append(value)


def _commit_event(data: str) -> CommitEvent | None:
    try:
        body = json.loads(data)
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    version, checksum = body.get("version"), body.get("checksum")
    if not isinstance(version, int) or isinstance(version, bool) or not isinstance(checksum, str):
        return None
    return CommitEvent(version=version, checksum=checksum)


class EventStream:
    """An open events stream: iterate for `CommitEvent`s; `close()` from any thread.

    Iterating raises `NetworkError` when the connection drops or stays silent past the
    read timeout (keep-alives arrive every 15 s); it simply ends when the server ends
    the stream or `close()` was called.
    """

    def __init__(self, response: httpx.Response, server: str) -> None:
        self._response = response
        self._server = server
        self._closed = threading.Event()

    def __iter__(self) -> Iterator[CommitEvent | ProposalEvent | ReviewEvent]:
        try:
            with _transport_errors(self._server):
                yield from parse_events(self._response.iter_lines())
        except NetworkError:
            if not self._closed.is_set():
                raise
        except Exception:
            # Reading a response another thread closed fails in httpx's own ways.
            if not self._closed.is_set():
                raise

    def close(self) -> None:
        """End the stream; a thread blocked reading it returns at once.

        Closing a socket does not wake a thread blocked in `recv` on it; shutting it
        down does, so the socket is shut down first.
        """
        self._closed.set()
        stream = self._response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(sock, socket.socket):
            with suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)

    def release(self) -> None:
        """Give the connection back (call from the thread that iterated)."""
        self._response.close()
