"""`AccessLog` writes the line `logging` would have written, or lets `logging` write it."""

from __future__ import annotations

import io
import json
import logging
import logging.config
import re
from collections.abc import Iterator

import pytest

from sync_server.logs import AccessLog, LogFormat, log_config

FIELDS = {
    "method": "PUT",
    "path": "/v1/team_memory",
    "status": 200,
    "repo": "acme/app",
    "client": "10.0.0.7",
    "token_name": "alice laptop",
    "duration_ms": 1.2,
}
MESSAGE = "PUT /v1/team_memory 200 1.2ms repo=acme/app client=10.0.0.7 by=alice laptop"


@pytest.fixture
def configured() -> Iterator[tuple[logging.Logger, io.StringIO, list[logging.Handler]]]:
    """`log_config`'s setup with the root handler's stream swapped for a buffer; the
    root's handlers (pytest's among them) put back afterwards."""
    root = logging.getLogger()
    saved = list(root.handlers), root.level
    stream = io.StringIO()
    yield logging.getLogger("memsync.test-access"), stream, saved[0]
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])


def setup(fmt: LogFormat, stream: io.StringIO) -> None:
    logging.config.dictConfig(log_config(fmt))
    handler = logging.getLogger().handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_the_line_is_the_one_logging_writes(
    fmt: LogFormat, configured: tuple[logging.Logger, io.StringIO, list[logging.Handler]]
) -> None:
    logger, stream, _ = configured
    setup(fmt, stream)
    AccessLog(logger).write(MESSAGE, dict(FIELDS))
    logger.info(MESSAGE, extra=dict(FIELDS))
    ours, theirs = stream.getvalue().splitlines()
    if fmt == "json":
        mine, logged = json.loads(ours), json.loads(theirs)
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", mine.pop("time"))
        logged.pop("time")
        assert list(mine.items()) == list(logged.items())
    else:  # the same but for the time, which is the same shape
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}", ours[:23])
        assert ours[23:] == theirs[23:] == f" INFO {logger.name} {MESSAGE}"


def test_another_handler_gets_the_record_with_its_fields(
    configured: tuple[logging.Logger, io.StringIO, list[logging.Handler]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger, stream, pytest_handlers = configured
    setup("text", stream)
    logging.getLogger().handlers.extend(pytest_handlers)  # caplog's handler among them
    with caplog.at_level(logging.INFO, logger=logger.name):
        AccessLog(logger).write(MESSAGE, dict(FIELDS))
    [record] = [r for r in caplog.records if r.name == logger.name]
    assert record.getMessage() == MESSAGE
    assert {key: record.__dict__[key] for key in FIELDS} == FIELDS
    assert stream.getvalue().endswith(f"INFO {logger.name} {MESSAGE}\n")
