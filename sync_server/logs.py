"""How the server logs: one configuration for the parent and every uvicorn worker.

`serve` hands `log_config(fmt)` to uvicorn, which applies it in the parent and again
in each worker process it spawns (a worker does not inherit the parent's logging
setup). Two formats: `text` for people, `json` for log shippers (one object per line).

Log records carry only fixed fields: method, path (no query string), status,
duration, the repo (validated and case-folded, as the routes see it), the client's
address and the token's *name* for requests; never a token, the rest of a query, or
entry text. In the text format the token's name comes last, since it may hold spaces:

    GET /v1/team_memory/log 200 3.1ms repo=acme/app client=10.0.0.7 by=alice laptop

A request with a well-formed but unknown, revoked or expired token names the token by
its public lookup id (the `id` that `token list` shows and `token revoke` takes; never
the secret), as `by=?id:<lookup id>` (JSON: `token_id`), and so does a 429 for such
tokens (limited per address); a token over its own limit is named. A client that leaves before
its request is answered is logged with status 499 (nginx's "client closed request").
An event stream gets two lines: one when it opens, and one when it ends with its
duration and why (`client-gone`, `token-revoked`, `token-expired`, `shutdown`):

    GET /v1/team_memory/events 200 open repo=acme/app client=10.0.0.7 by=alice
    GET /v1/team_memory/events 200 end 61234.5ms reason=token-revoked repo=acme/app \
client=10.0.0.7 by=alice
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import parse_qsl, quote

from memsync_protocol.repos import InvalidRepoError, normalize_repo

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
# The `extra` fields of an access-log record (`sync_server.app.RequestGuard`), in order.
# `stream`, `end_reason` and `token_id` appear only on the lines that have them.
REQUEST_FIELDS = (
    "method",
    "path",
    "status",
    "duration_ms",
    "repo",
    "client",
    "token_name",
    "token_id",
    "stream",
    "end_reason",
)
# The status logged and counted for a client that left before its answer.
CLIENT_CLOSED_REQUEST = 499
# `by=` for a well-formed token the server does not accept (unknown, revoked, expired).
REFUSED_ID_PREFIX = "?id:"
_MAX_REPO_CHARS = 201


# The web page names its repo in the path: /ui/repo/OWNER/NAME[/...].
_UI_REPO_PREFIX = "/ui/repo/"


def request_repo(query_string: bytes, path: str = "") -> str:
    """The repo a request is about as the routes see it: the `repo` of the query string
    (the last one given), or the web page's `/ui/repo/OWNER/NAME` path; validated and
    case-folded, or `-` when missing or invalid: nothing else of the query, and nothing
    a client could use to forge a log line, reaches the log."""
    if path.startswith(_UI_REPO_PREFIX):
        owner, _, rest = path[len(_UI_REPO_PREFIX) :].partition("/")
        return _valid_repo(f"{owner}/{rest.partition('/')[0]}")
    if b"repo=" not in query_string:
        return "-"
    found = None
    for name, value in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True):
        if name == "repo":
            found = value
    return "-" if found is None else _valid_repo(found)


def _valid_repo(found: str) -> str:
    if len(found) > _MAX_REPO_CHARS:
        return "-"
    try:
        return normalize_repo(found)
    except InvalidRepoError:
        return "-"


def text_path(path: str) -> str:
    """The decoded path for the text line, with spaces, control and non-ASCII characters
    percent-encoded again, so one request is one line of space-separated fields."""
    return quote(path, safe="/:@!$&'()*+,;=-._~")


def client_address(scope: Mapping[str, Any]) -> str:
    """The peer's host: the proxy's, unless uvicorn's `FORWARDED_ALLOW_IPS` trusts it
    to name the client (`X-Forwarded-For`); `-` on a Unix socket."""
    client = scope.get("client")
    return str(client[0]) if client else "-"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, pid, request fields.

    An exception is reported by its type only: its text or traceback may quote data.
    """

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        error = None
        if record.exc_info and record.exc_info[0] is not None:
            error = record.exc_info[0].__name__
        return json_line(
            record.created,
            record.levelname,
            record.name,
            record.getMessage(),
            record.process,
            record.__dict__,
            error,
        )


def json_line(
    created: float,
    level: str,
    logger: str,
    message: str,
    pid: int | None,
    fields: Mapping[str, Any],
    error: str | None = None,
) -> str:
    """The `json` format's line (no newline): `JsonFormatter`'s, and the access log's
    when it writes its lines itself (`AccessLog`), so both are one format."""
    moment = datetime.fromtimestamp(created, UTC)
    payload: dict[str, Any] = {
        "time": moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z",
        "level": level,
        "logger": logger,
        "message": message,
        "pid": pid,
    }
    for field in REQUEST_FIELDS:
        if field in fields:
            payload[field] = fields[field]
    if error is not None:
        payload["error"] = error
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def log_config(fmt: LogFormat) -> dict[str, Any]:
    """A `logging.config.dictConfig` dict: everything at INFO to stderr in `fmt`."""
    formatter: dict[str, Any] = (
        {"()": f"{__name__}.JsonFormatter"} if fmt == "json" else {"format": TEXT_FORMAT}
    )
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"memsync": formatter},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "formatter": "memsync",
                "stream": "ext://sys.stderr",
            }
        },
        "root": {"handlers": ["stderr"], "level": "INFO"},
        "loggers": {
            # uvicorn's loggers keep no handlers of their own: they reach root's.
            "uvicorn": {"handlers": [], "level": "INFO", "propagate": True},
            "uvicorn.error": {"handlers": [], "level": "INFO", "propagate": True},
            # The request log is ours (`memsync.access`), with the token's name.
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": True},
            "alembic": {"level": "WARNING"},
        },
    }


# What `AccessLog` writes itself, by the root handler's formatter: ("text" | "json").
_DirectKind = Literal["text", "json"]


def _direct_kind(handler: logging.Handler) -> _DirectKind | None:
    """How `AccessLog` may write `handler`'s lines itself: when it is the plain stream
    handler `log_config` sets up, with one of its two formatters unchanged; else None
    (the `logging` module then writes them, whatever the handler does)."""
    if type(handler) is not logging.StreamHandler or handler.filters:
        return None
    if handler.level > logging.INFO or handler.terminator != "\n":
        return None
    formatter = handler.formatter
    if type(formatter) is JsonFormatter:
        return "json"
    if (
        type(formatter) is logging.Formatter
        and formatter._fmt == TEXT_FORMAT
        and type(formatter._style) is logging.PercentStyle
        and formatter.datefmt is None
        and formatter.converter is time.localtime
        and formatter.default_time_format == logging.Formatter.default_time_format
        and formatter.default_msec_format == logging.Formatter.default_msec_format
    ):
        return "text"
    return None


class AccessLog:
    """The access log's writer: the same lines, fields and destination as an INFO
    record of `logger` through `logging`, at a fraction of the cost.

    A record through `logging` builds a `LogRecord` (a dozen attributes: thread, process,
    caller), formats it in three steps and takes two locks; at one line a request that
    was about a quarter of the event loop's time on a one-key PUT. When the
    configuration is `log_config`'s (the logger and its parents without handlers of their
    own, one plain `StreamHandler` on the root with one of its formatters), this writes
    the line itself: the same text under the handler's lock, onto the handler's
    stream. Anything else (an operator's own config, pytest's capture, a filter, a level
    raised) goes through `logging` as before, with the fields as the record's `extra`.

    Not lost on a kill -9: each line reaches the stream's file descriptor when it is
    written (a line-buffered stream, as stderr is, writes through at the newline; any
    other stream is flushed, as `StreamHandler` does), never held in a buffer of ours.
    """

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger
        self._handler: logging.Handler | None = None
        self._formatter: logging.Formatter | None = None
        self._kind: _DirectKind | None = None
        self._second = -1
        self._stamp = ""

    def _direct(self) -> tuple[logging.StreamHandler[Any], _DirectKind] | None:
        """The root's handler and how to write for it, when a line may skip `logging`."""
        logger: logging.Logger | None = self.logger
        root = logging.root
        while logger is not None and logger is not root:
            if logger.handlers or logger.filters or not logger.propagate:
                return None
            logger = logger.parent
        handlers = root.handlers
        if len(handlers) != 1:
            return None
        handler = handlers[0]
        if handler is not self._handler or handler.formatter is not self._formatter:
            self._handler, self._formatter = handler, handler.formatter
            self._kind = _direct_kind(handler)
        elif handler.filters or handler.level > logging.INFO:
            return None
        if self._kind is None:
            return None
        assert isinstance(handler, logging.StreamHandler)
        return handler, self._kind

    def write(self, message: str, fields: dict[str, Any]) -> None:
        """Log `message` at INFO, with `fields` as the record's extra fields (the JSON
        format's)."""
        logger = self.logger
        if not logger.isEnabledFor(logging.INFO):
            return
        direct = self._direct()
        if direct is None:
            logger.info(message, extra=fields)
            return
        handler, kind = direct
        created = time.time()
        if kind == "text":
            second = int(created)
            if second != self._second:
                self._second = second
                self._stamp = time.strftime(
                    logging.Formatter.default_time_format, time.localtime(created)
                )
            msecs = int((created - second) * 1000)
            line = f"{self._stamp},{msecs:03d} INFO {logger.name} {message}\n"
        else:
            line = json_line(created, "INFO", logger.name, message, os.getpid(), fields) + "\n"
        stream = handler.stream
        handler.acquire()
        try:
            stream.write(line)
            if not getattr(stream, "line_buffering", False):
                stream.flush()
            return
        except Exception:  # noqa: S110 - a closed or broken stream: `logging`'s way below
            pass
        finally:
            handler.release()
        logger.info(message, extra=fields)
