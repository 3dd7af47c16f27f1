"""How `memsync review` names a proposal's author."""

from __future__ import annotations

import pytest

from sync_client.cli.review import _proposal_lines


def _first_line(item: dict[str, object], capsys: pytest.CaptureFixture[str]) -> str:
    _proposal_lines({"id": 7, "status": "pending", "at": "2026-12-03T10:00:00Z", **item})
    return capsys.readouterr().out.splitlines()[0]


def test_a_proposal_names_its_person_and_the_machine_token_that_made_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    line = _first_line({"author": "alice-laptop", "person": "alice"}, capsys)
    assert line == "proposal 7: pending, by alice (alice-laptop), at 2026-12-03T10:00:00Z"
    # A token named as its person, or an older server with no person: the name alone.
    assert ", by alice, at" in _first_line({"author": "alice", "person": "alice"}, capsys)
    assert ", by bob, at" in _first_line({"author": "bob"}, capsys)
