"""`memsync enable`, `disable` and `watch`: the watcher, the repos it serves, its service."""

from __future__ import annotations

import functools
import logging
import os
import sys
from pathlib import Path

import click

from sync_client.cli._common import (
    EXIT_NEEDS_USER,
    EXIT_OK,
    _as_json,
    _emit,
    _notice,
    _options,
    _say,
    global_options,
    run_safely,
    visible,
)


@click.command()
@global_options
@click.option(
    "--personal/--no-personal",
    default=None,
    help="Also sync your private memory folder and agent memory to your own space.",
)
@run_safely
def enable(personal: bool | None) -> None:
    """Enroll this repo for `memsync watch --all`.

    Saves its team dir and server (or --repo, --dir, --server) in your config dir.

    \b
    Exit codes:
      0  enabled (or already enabled)
      1  failed (the list cannot be written)
      2  usage or configuration error (no server, no team dir)
    """
    from sync_client.config import (
        Enrollment,
        config_home,
        enroll,
        enrolled_config,
        git_root,
        resolve_target,
    )
    from sync_client.errors import NoCredentials
    from sync_client.watch.login_service import token_warning

    options = _options()
    server, repo, team_dir = resolve_target(
        server=options.get("server"),
        repo=options.get("repo"),
        team_dir=options.get("team_dir"),
        cwd=Path.cwd(),
        env=os.environ,
    )
    assert server is not None  # required above
    assert team_dir is not None
    from sync_client.claude_code import canonical_root

    # A worktree enrolls its main checkout: one repo, one folder, never a second copy.
    checkout = git_root(Path.cwd())
    root = None if checkout is None else canonical_root(checkout)
    item = Enrollment(server=server, repo=repo, team_dir=team_dir, git_root=root)
    added = enroll(config_home(os.environ), item)
    personal_changed = None
    if personal is not None:
        from sync_client.personal import private_folder, set_personal

        if personal:
            private_folder(team_dir)  # a team dir set elsewhere has no private folder
        personal_changed = set_personal(config_home(os.environ), server, repo, on=personal)
    note = None
    try:
        enrolled_config(item, token=options.get("token"), env=os.environ)
    except NoCredentials as error:
        note = f"{error}; the watcher waits for it"
    warning = None if note else token_warning(os.environ, [item], token=options.get("token"))

    def human() -> None:
        verb = "enabled" if added else "already enabled"
        _say(f"{verb}: {repo} (team dir {team_dir}, server {server})")
        _say("`memsync watch --all` serves it (`memsync watch --install` runs that at login)")
        if personal is not None:
            state = "syncs" if personal else "no longer syncs"
            _say(
                f"personal: {state} your private memory folder ({team_dir.parent}, minus "
                "team/) and your agent memory with your own space; nobody else's token "
                "reads it" + ("" if personal_changed else " (unchanged)")
            )
        if note:
            _say(f"note: {note}")

    payload: dict[str, object] = {"enabled": item.as_json(), "added": added, "note": note}
    if personal is not None:
        payload["personal"] = personal
    _emit(payload, human)
    if warning:
        _notice(f"warning: {warning}")


@click.command()
@global_options("server", "repo", "dir", "json")
@run_safely
def disable() -> None:
    """Stop `memsync watch --all` serving this repo (or --repo, --dir).

    \b
    Exit codes:
      0  disabled (or it was not enabled)
      1  failed (the list cannot be written)
      2  usage or configuration error
    """
    from sync_client.config import config_home, resolve_target, unenroll

    options = _options()
    server, repo, team_dir = resolve_target(
        server=options.get("server"),
        repo=options.get("repo"),
        team_dir=options.get("team_dir"),
        cwd=Path.cwd(),
        env=os.environ,
        require_server=False,
        require_team_dir=False,
    )
    # The saved server is the one enable used; only an explicit one narrows the match.
    explicit_server = options.get("server") or os.environ.get("MEMSYNC_SERVER")
    removed = unenroll(
        config_home(os.environ),
        repo=repo,
        server=server if explicit_server else None,
        team_dir=team_dir,
    )

    def human() -> None:
        if not removed:
            _say(f"{repo} was not enabled")
        for item in removed:
            _say(f"disabled: {item.repo} (team dir {item.team_dir}, server {item.server})")

    _emit({"removed": [item.as_json() for item in removed]}, human)


class _VisibleFormatter(logging.Formatter):
    """A log line with its control and bidi characters made visible (`_say`'s rule)."""

    def format(self, record: logging.LogRecord) -> str:
        """The line as `logging.Formatter` makes it, then made visible."""
        return visible(super().format(record))


def _watch_logging() -> None:
    """The watcher's log on stderr, one line per message (journald keeps it)."""
    import time

    handler = logging.StreamHandler(sys.stderr)
    # A UTC timestamp on every line: a log read days later (or copied out of journald)
    # still says when each thing happened.
    # Made visible like every line the CLI prints: a line may name a key, an author or
    # a reviewer's reason, and is read in a terminal (`journalctl`, `tail -f`).
    formatter = _VisibleFormatter(
        "%(asctime)s.%(msecs)03dZ memsync watch: %(levelname)s %(message)s",
        datefmt="%Y-%m-%dT%H:%M:%S",
    )
    formatter.converter = time.gmtime
    handler.setFormatter(formatter)
    logger = logging.getLogger("memsync.watch")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def _service(uninstall: bool, no_start: bool) -> None:
    from sync_client.config import config_home, read_enrolled
    from sync_client.errors import ConfigError
    from sync_client.watch import login_service as service

    kind = service.service_kind()
    if uninstall:
        done = service.uninstall(os.environ, kind, activate=not no_start)
        warning = None
    else:
        try:
            enrolled = read_enrolled(config_home(os.environ))
        except ConfigError:
            enrolled = []  # `memsync watch --all` names the damaged file when it starts
        warning = service.token_warning(os.environ, enrolled, token=_options().get("token"))
        done = service.install(os.environ, kind, activate=not no_start)
    not_started = (
        None
        if done.activation_error is None
        else f"the service is installed but not started: {done.activation_error}"
    )

    def human() -> None:
        if uninstall:
            _say(f"removed {done.path}" if done.changed else f"no service at {done.path}")
            if done.changed and not done.activated:
                if done.activation_error is not None:
                    _say(f"not stopped: {done.activation_error}")
                _say(f"if it still runs: `{done.command}`")
            return
        _say(f"wrote {done.path}" if done.changed else f"{done.path} is up to date")
        if done.activated:
            _say("started; it runs `memsync watch --all` at every login")
        elif not_started is None:
            _say(f"to start it now and at every login: `{done.command}`")
        else:
            _notice(not_started)
            for line in done.instead():
                _say(line)

    _emit(done.as_json(), human)
    if uninstall:
        return
    if not_started is not None and _as_json():
        _notice(not_started)
    if warning:
        _notice(f"warning: {warning}")
    if not_started is not None:
        sys.exit(EXIT_NEEDS_USER)


@click.command()
@click.option("--all", "all_repos", is_flag=True, help="Every enrolled repo (`memsync enable`).")
@click.option(
    "--debounce",
    type=click.FloatRange(min=0.0, max=3600.0),
    default=2.0,
    show_default=True,
    help="Seconds of quiet before a push.",
)
@click.option(
    "--poll-interval",
    type=click.FloatRange(min=1.0),
    default=30.0,
    show_default=True,
    help="Seconds between pulls when the server's events stream is unavailable.",
)
@click.option("--install", is_flag=True, help="Install a user service running `watch --all`.")
@click.option("--uninstall", is_flag=True, help="Stop and remove that service.")
@click.option("--no-start", is_flag=True, help="With --install/--uninstall: only the file.")
@global_options
@run_safely
def watch(
    all_repos: bool,
    debounce: float,
    poll_interval: float,
    install: bool,
    uninstall: bool,
    no_start: bool,
) -> None:
    """Sync in the foreground as files change, until SIGINT or SIGTERM.

    --all serves every repo `memsync enable` enrolled; --install sets up a user service
    that runs `memsync watch --all` at every login. One watcher serves a repo: a second
    one stands by and takes over when the first stops.

    \b
    Exit codes:
      0  stopped by SIGINT or SIGTERM (or the service was installed or removed)
      1  failed
      2  usage or configuration error (a bad option, no server or token)
      3  --install wrote the service but could not start it (no user session bus, no
         systemctl): the lines printed say why and what to run
    """
    import contextlib
    import signal
    import threading

    from sync_client.config import (
        ENROLLED_FILE,
        config_home,
        enrolled_config,
        read_enrolled,
        resolve_options,
        state_dir_for,
    )
    from sync_client.errors import ConfigError, NoCredentials, NoRepoIdentity
    from sync_client.watch.watcher import Target, Watcher, WatchSettings

    if install and uninstall:
        raise ConfigError("--install and --uninstall exclude each other")
    if install or uninstall:
        _service(uninstall, no_start)
        return
    options = dict(_options())
    env = dict(os.environ)
    cwd = Path.cwd()
    watch_file = None
    if all_repos:
        home = config_home(env)
        watch_file = home / ENROLLED_FILE
        read_enrolled(home)  # a malformed file is the user's to fix: exit 2 now

        def targets() -> list[Target]:
            from sync_client.watch.personal import personal_targets

            enrolled = read_enrolled(home)
            return [
                Target(
                    label=item.repo,
                    resolve=functools.partial(
                        enrolled_config, item, token=options.get("token"), env=env
                    ),
                    identity=(item.server, item.repo, str(item.team_dir)),
                    git_cwd=item.git_root,
                    state_dir=state_dir_for(env, item.server, item.repo, item.team_dir),
                )
                for item in enrolled
            ] + personal_targets(enrolled, home, token=options.get("token"), env=env)
    else:
        resolve_here = functools.partial(resolve_options, options, cwd=cwd, env=env)
        label = cwd.name
        # Without a token or a git remote, the watcher waits for `memsync login` or one.
        # Another watcher of this repo: this one stands by to take over (the log says).
        with contextlib.suppress(NoCredentials, NoRepoIdentity):
            label = resolve_here().repo

        def targets() -> list[Target]:
            return [Target(label=label, resolve=resolve_here, identity=("here",), git_cwd=cwd)]

    _watch_logging()
    stop = threading.Event()
    watcher = Watcher(
        targets,
        WatchSettings(debounce=debounce, poll_interval=poll_interval),
        env=env,
        watch_file=watch_file,
    )

    def on_signal(signum: int, _frame: object) -> None:
        # Named in the shutdown line; a second signal while it flushes changes nothing.
        if watcher.stop_reason is None:
            watcher.stop_reason = signal.Signals(signum).name
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    watcher.run(stop)
    sys.exit(EXIT_OK)


COMMANDS = (enable, disable, watch)
