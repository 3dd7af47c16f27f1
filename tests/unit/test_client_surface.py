"""The client library's public surface is pinned, and every name resolves."""

from __future__ import annotations

import pytest

import sync_client


def test_public_names() -> None:
    assert sync_client.__all__ == [
        "Api",
        "ClientConfig",
        "PullResult",
        "PushResult",
        "Workspace",
        "pull",
        "push",
        "resolve",
        "status",
    ]


@pytest.mark.parametrize("name", sync_client.__all__)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(sync_client, name) is not None


def test_unknown_names_raise_attribute_error() -> None:
    with pytest.raises(AttributeError):
        sync_client.nothing_here  # noqa: B018
