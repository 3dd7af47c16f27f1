"""The three-way rule per key (docs/protocol.md 4.3, 4.4), as pure functions."""

from __future__ import annotations

from sync_client.plan import (
    PullKind,
    allowed_keys,
    plan_pull,
    push_delta,
    sort_after_refusal,
)


def kinds(**server: str) -> dict[str, PullKind]:
    local = {"same": "s", "fresh": "f0", "mine": "m1", "both": "b1", "gone_here": None}
    bases = {"same": "s0", "fresh": "f0", "mine": "m0", "both": "b0", "gone_here": "g0"}
    actions = plan_pull(
        {k: v for k, v in local.items() if v is not None}, bases, server, deleted=[]
    )
    return {action.key: action.kind for action in actions}


def test_pull_rules_per_key() -> None:
    assert kinds(
        same="s",  # local already equals server
        fresh="f1",  # unchanged here since base: take the server's
        mine="m0",  # changed here only: keep, pending push
        both="b2",  # changed on both: conflict, server wins
        gone_here="g1",  # deleted here: restored by the pull
        new_key="n1",  # new on the server
    ) == {
        "same": PullKind.SAME,
        "fresh": PullKind.WRITE,
        "mine": PullKind.KEEP_LOCAL,
        "both": PullKind.CONFLICT,
        "gone_here": PullKind.WRITE,
        "new_key": PullKind.WRITE,
    }


def test_server_deletes_remove_only_unchanged_files() -> None:
    actions = plan_pull(
        local={"clean": "c0", "edited": "e1"},
        bases={"clean": "c0", "edited": "e0", "absent": "a0"},
        server={},
        deleted=["clean", "edited", "absent"],
    )
    assert {action.key: action.kind for action in actions} == {
        "clean": PullKind.DELETE,
        "edited": PullKind.KEEP_DELETED,
        "absent": PullKind.FORGET,
    }


def test_push_delta_is_changed_and_new_keys_never_local_deletes() -> None:
    assert push_delta({"a": "1", "b": "2", "c": "3"}, {"a": "1", "b": "0", "gone": "9"}) == [
        "b",
        "c",
    ]


def test_sort_after_refusal() -> None:
    sorted_keys = sort_after_refusal(
        ["settled", "teammate", "retry"],
        local={"settled": "x", "teammate": "mine", "retry": "r1"},
        bases={"settled": "old", "teammate": "t0", "retry": "r0"},
        server={"settled": "x", "teammate": "theirs", "retry": "r0"},
    )
    assert sorted_keys.done == ["settled"]
    assert sorted_keys.conflicts == ["teammate"]
    assert sorted_keys.retry == ["retry"]


def test_allowed_keys_leave_out_the_alphabetically_last_new_keys() -> None:
    assert allowed_keys(["e", "a", "d", "b", "c"], [], 3) == {"a", "b", "c"}
    # Keys already on the server always fit; new ones fill what is left.
    assert allowed_keys(["z", "a", "b"], ["z", "y"], 3) == {"z", "a"}
    assert allowed_keys(["a"], ["x", "y", "z"], 3) == set()
