"""Fuzz a live server through its own OpenAPI schema with schemathesis.

The schema is the one the server publishes at `/openapi.json`; every operation in it
is exercised over real HTTP on 127.0.0.1 (SQLite backend) with a valid bearer token:

* the coverage phase: schemathesis's deterministic cases (boundary values, missing
  required parameters, wrong types, unexpected methods), once each;
* the fuzzing phase: up to `MAX_EXAMPLES` Hypothesis-generated cases per operation,
  with valid (positive) and invalid (negative) data, half of them aimed at the seeded
  repo so they get past `repo` validation and into the handlers.

Every answer must pass `CHECKS`: never a 5xx, a body that matches the documented
response schema, documented headers, status code and content type, and auth actually
enforced. Shrinking is off (a failing case is reported as found, with a curl line to
reproduce it), so the run stays bounded: about 10 s in all.

The schemathesis pytest plugin (`schemathesis.pytest.from_fixture`) does not run under
pytest 9 (it reads `Function._nodeid`), so the tests drive schemathesis explicitly:
one Hypothesis run per operation, with `case.call` and `case.validate_response`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import hypothesis
import pytest
import schemathesis
from hypothesis import Phase, given
from hypothesis import strategies as st
from schemathesis import APIOperation, BaseSchema, Case, GenerationMode
from schemathesis.checks import CheckFunction, not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    missing_required_header,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from sync_server.config import Settings
from tests.liveserver import LiveServer, run_live_server

API = "/v1/team_memory"
SEEDED_REPO = "acme/app"
MAX_EXAMPLES = 25

Operation = APIOperation[Any, Any, Any, Any]
OperationCase = Case[Any]

# Checks about what the server does.
BEHAVIOUR_CHECKS: list[CheckFunction] = [
    not_a_server_error,
    response_schema_conformance,
    response_headers_conformance,
    ignored_auth,
    missing_required_header,
]
# Not `negative_data_rejection`: it counts an unknown extra query parameter as invalid
# data (the server ignores those, as most HTTP APIs do) and a dropped Authorization
# header as invalid even though the fuzzer always sends its valid one, so it reports
# correct answers (a 412 for a stale If-Match, say) as "invalid data accepted".
# Checks that the schema documents what the server does.
DOCUMENTATION_CHECKS: list[CheckFunction] = [status_code_conformance, content_type_conformance]
CHECKS = BEHAVIOUR_CHECKS + DOCUMENTATION_CHECKS

MAX_INT64 = 2**63 - 1

FUZZ_SETTINGS = hypothesis.settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: report the case as found
)


@pytest.fixture
def live(sqlite_database_url: str) -> Iterator[LiveServer]:
    """A live SQLite server with rate limiting off and one seeded repo."""
    with run_live_server(Settings(database_url=sqlite_database_url, rate_limit_burst=0)) as server:
        with server.client(server.token("*", name="seeder")) as seeder:
            seeded = seeder.put(
                API, params={"repo": SEEDED_REPO}, json={"entries": {"notes/a.md": "alpha\n"}}
            )
            assert seeded.status_code == 200, seeded.text
        yield server


@pytest.fixture
def auth(live: LiveServer) -> dict[str, str]:
    """The headers of a read-write token for every repo."""
    return {"Authorization": f"Bearer {live.token('*', name='fuzzer')}"}


@pytest.fixture
def schema(live: LiveServer) -> BaseSchema:
    """The server's own OpenAPI schema, fetched over HTTP."""
    loaded = schemathesis.openapi.from_url(
        f"{live.base_url}/openapi.json", config=schemathesis.Config()
    )
    loaded.config.update(base_url=live.base_url)
    return loaded


def operations(schema: BaseSchema) -> list[Operation]:
    """Every operation in the schema; the core ones must be there."""
    found = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), f"the schema has an invalid operation: {result.err()}"
        found.append(result.ok())
    labels = {operation.label for operation in found}
    assert {f"GET {API}", f"PUT {API}", f"DELETE {API}"} <= labels, labels
    return found


def call_and_check(live: LiveServer, auth: dict[str, str], case: OperationCase) -> None:
    """Send `case` to the live server and run the checks on the answer.

    After a 5xx, one more round trip before checking: the server thread logs a
    traceback right after answering, and on Python < 3.11.8 that races with pytest
    formatting the failure's traceback in this thread ("SystemError: AST constructor
    recursion depth mismatch", CPython gh-106905, an INTERNALERROR that ends the run).
    The server serves requests on one event loop, so the answer to GET /healthz only
    comes once that logging is done.
    """
    response = case.call(base_url=live.base_url, headers=auth, timeout=30)
    if response.status_code >= 500:
        httpx.get(f"{live.base_url}/healthz", timeout=30)
    case.validate_response(response, checks=CHECKS, headers=auth)


def has_inputs(operation: Operation) -> bool:
    """Whether the schema gives it anything to make invalid: parameters, a body, a token."""
    raw: dict[str, Any] = operation.definition.raw
    return bool(raw.get("parameters") or raw.get("requestBody") or raw.get("security"))


def report_failures(failures: dict[str, str]) -> None:
    if failures:
        listed = "\n\n".join(f"=== {label}\n{report}" for label, report in failures.items())
        pytest.fail(f"{len(failures)} operation(s) failed:\n\n{listed}", pytrace=False)


def failure_report(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:4000]


def test_coverage_cases_pass_every_check(
    live: LiveServer, auth: dict[str, str], schema: BaseSchema
) -> None:
    """Schemathesis's deterministic boundary and wrong-type cases, each sent once."""
    failures: dict[str, str] = {}
    sent = 0
    for operation in operations(schema):
        cases = schema.iter_coverage_cases(
            operation,
            generation_modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
            generation_config=schema.config.generation_for(operation=operation, phase="coverage"),
        )
        for case in cases:
            sent += 1
            try:
                call_and_check(live, auth, case)
            except (Exception, BaseExceptionGroup) as error:
                failures.setdefault(operation.label, failure_report(error))
    assert sent > 100, f"only {sent} coverage cases: is the schema empty?"
    report_failures(failures)


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
def test_fuzzed_cases_pass_every_check(
    live: LiveServer, auth: dict[str, str], schema: BaseSchema, mode: GenerationMode
) -> None:
    """Hypothesis-generated cases per operation; half aimed at the seeded repo."""
    failures: dict[str, str] = {}
    for operation in operations(schema):
        if mode is GenerationMode.NEGATIVE and not has_inputs(operation):
            continue
        strategy = operation.as_strategy(generation_mode=mode)
        if any(parameter.name == "repo" for parameter in operation.query):
            aimed = operation.as_strategy(generation_mode=mode, query={"repo": SEEDED_REPO})
            strategy = st.one_of(strategy, aimed)
        run = fuzz_run(strategy, lambda case: call_and_check(live, auth, case))
        try:
            run()
        except (Exception, BaseExceptionGroup) as error:
            failures[operation.label] = failure_report(error)
    report_failures(failures)


def fuzz_run(
    strategy: st.SearchStrategy[OperationCase], check: Callable[[OperationCase], None]
) -> Callable[[], None]:
    """A bounded Hypothesis test that sends every case `strategy` draws."""

    @FUZZ_SETTINGS
    @given(case=strategy)
    def run(case: OperationCase) -> None:
        check(case)

    return run


@pytest.mark.parametrize("with_token", [True, False], ids=["token", "no-token"])
def test_metrics_answers_are_documented(
    live: LiveServer, auth: dict[str, str], schema: BaseSchema, with_token: bool
) -> None:
    """GET /metrics documents its text/plain answer and its 401."""
    operation = schema.find_operation_by_label("GET /metrics")
    assert operation is not None
    case = operation.Case()
    headers = auth if with_token else {}
    response = case.call(base_url=live.base_url, headers=headers, timeout=30)
    case.validate_response(response, checks=DOCUMENTATION_CHECKS, headers=headers)


@pytest.mark.parametrize("version", [MAX_INT64 + 1, 10**30], ids=["2**63", "10**30"])
@pytest.mark.parametrize("label", [f"POST {API}/restore", f"GET {API}/history"])
def test_versions_beyond_int64_pass_every_check(
    live: LiveServer, auth: dict[str, str], schema: BaseSchema, label: str, version: int
) -> None:
    """Versions beyond the database's integers are a 4xx, not a 500."""
    operation = schema.find_operation_by_label(label)
    assert operation is not None
    if label.startswith("POST"):
        case = operation.Case(
            query={"repo": SEEDED_REPO}, body={"key": "notes/a.md", "version": version}
        )
    else:
        case = operation.Case(query={"repo": SEEDED_REPO, "key": "notes/a.md", "version": version})
    call_and_check(live, auth, case)


def test_fuzzing_reaches_the_handlers(live: LiveServer, auth: dict[str, str]) -> None:
    """The seeded repo is readable with the fuzzer's token: aimed cases get past auth."""
    with httpx.Client(base_url=live.base_url, headers=auth) as client:
        response = client.get(API, params={"repo": SEEDED_REPO})
    assert response.status_code == 200, response.text
