"""The client library's public surface is pinned, and every name resolves."""

from __future__ import annotations

import types

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


def test_resolve_stays_the_resolver_after_the_commands_load() -> None:
    """`from sync_client import resolve` gives the function, before and after the
    `memsync resolve`/`restore` code is imported (a submodule of the same name would
    replace it on the package once imported)."""
    import importlib

    from sync_client.config import resolve

    assert sync_client.resolve is resolve
    importlib.import_module("sync_client.settle")
    importlib.import_module("sync_client.cli")
    from sync_client import resolve as again

    assert again is resolve
    assert callable(again)


def test_the_functions_stay_themselves_once_every_submodule_is_loaded() -> None:
    """`from sync_client import pull` is the function even after `sync_client.pull`, the
    module, has been imported (the CLI imports them all)."""
    import importlib
    import pkgutil

    for info in pkgutil.iter_modules(sync_client.__path__):
        if info.name != "__main__":
            importlib.import_module(f"sync_client.{info.name}")
    from sync_client import pull, push, resolve, status
    from sync_client.config.resolution import resolve as resolver
    from sync_client.pull import pull as puller
    from sync_client.push import push as pusher
    from sync_client.status import status as reporter

    imported: tuple[object, ...] = (pull, push, resolve, status)  # mypy sees modules here
    assert imported == (puller, pusher, resolver, reporter)
    for name in sync_client.__all__:
        assert not isinstance(getattr(sync_client, name), types.ModuleType), name


def test_no_submodule_of_config_is_named_like_a_public_name() -> None:
    """A submodule named like an exported name would replace it once imported."""
    import pkgutil

    import sync_client.config

    submodules = {info.name for info in pkgutil.iter_modules(sync_client.config.__path__)}
    assert not submodules & set(sync_client.config.__all__)
