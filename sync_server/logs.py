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
# The access log's text line, with the same fields (`-` for one a request lacks).
ACCESS_FORMAT = "%s %s %d %.1fms repo=%s client=%s by=%s"
# An event stream's lines: when it opens, and when it ends (with why).
STREAM_OPEN_FORMAT = "%s %s %d open repo=%s client=%s by=%s"
STREAM_END_FORMAT = "%s %s %d end %.1fms reason=%s repo=%s client=%s by=%s"
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
    """The peer's host: the proxy's, unless uvicorn's `--forwarded-allow-ips` trusts it
    to name the client (`X-Forwarded-For`); `-` on a Unix socket."""
    client = scope.get("client")
    return str(client[0]) if client else "-"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, pid, request fields.

    An exception is reported by its type only: its text or traceback may quote data.
    """

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        moment = datetime.fromtimestamp(record.created, UTC)
        payload: dict[str, Any] = {
            "time": moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,
        }
        for field in REQUEST_FIELDS:
            if field in record.__dict__:
                payload[field] = record.__dict__[field]
        if record.exc_info and record.exc_info[0] is not None:
            payload["error"] = record.exc_info[0].__name__
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
