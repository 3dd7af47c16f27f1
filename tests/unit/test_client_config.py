"""Client configuration: remote URLs, Claude Code's layout, refused team dirs, credentials,
and resolution from trusted sources only (docs/protocol.md 2, 4.1, 4.7).

Every test passes an env whose HOME and XDG folders are inside tmp_path, and the
process environment is pointed there too, so nothing touches the real home or the
user's git configuration.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

from sync_client.claude_code import sanitize_path
from sync_client.config import (
    CONFIG_FILE,
    CREDENTIALS_FILE,
    ClientConfig,
    config_home,
    default_team_dir,
    git_root,
    origin_url,
    parse_remote_url,
    read_credentials,
    remove_credentials,
    resolve,
    resolve_parts,
    state_home,
    validate_team_dir,
    write_credentials,
)
from sync_client.errors import ConfigError, NoCredentials, NoRepoIdentity

TOKEN = "mst_" + "A" * 42
OTHER_TOKEN = "mst_" + "B" * 42


@pytest.fixture(autouse=True)
def isolated_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """git runs with the process environment: keep it off the real home and git config."""
    for name in list(os.environ):
        if name.startswith(("GIT_", "MEMSYNC_", "XDG_")):
            monkeypatch.delenv(name)
    process_home = tmp_path / "process-home"
    process_home.mkdir()
    monkeypatch.setenv("HOME", str(process_home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home" / "user"
    path.mkdir(parents=True)
    return path


@pytest.fixture
def env(tmp_path: Path, home: Path) -> dict[str, str]:
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),
        "XDG_STATE_HOME": str(tmp_path / "xdg-state"),
    }


def git(cwd: Path, *arguments: str) -> None:
    subprocess.run(["git", *arguments], cwd=cwd, check=True, capture_output=True, timeout=30)


def make_repo(path: Path, origin: str | None = None) -> Path:
    """A real git repository at `path`, with a remote `origin` when given."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    if origin is not None:
        git(path, "remote", "add", "origin", origin)
    return path.resolve()


def write_user_config(env: dict[str, str], text: str) -> Path:
    directory = config_home(env)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / CONFIG_FILE
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "src" / "my.app", "git@github.com:Acme/Widgets.git")


@pytest.fixture
def logged_in(env: dict[str, str]) -> None:
    write_credentials(config_home(env), server="https://creds.example", token=TOKEN)


def resolve_in(cwd: Path, env: dict[str, str], **flags: str) -> ClientConfig:
    return resolve(
        server=flags.get("server"),
        token=flags.get("token"),
        repo=flags.get("repo"),
        team_dir=flags.get("team_dir"),
        cwd=cwd,
        env=env,
    )


# --- remote URLs -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://github.com/acme/widgets", "acme/widgets"),
        ("https://github.com/acme/widgets.git", "acme/widgets"),
        ("https://github.com/acme/widgets/", "acme/widgets"),
        ("https://github.com/acme/widgets.git/", "acme/widgets"),
        ("http://git.internal:8080/acme/widgets.git", "acme/widgets"),
        ("https://user:secret@github.com/acme/widgets.git", "acme/widgets"),
        ("ssh://git@github.com/acme/widgets.git", "acme/widgets"),
        ("ssh://git@git.example.org:2222/acme/widgets.git", "acme/widgets"),
        ("ssh://[::1]:22/acme/widgets.git", "acme/widgets"),
        ("git+ssh://git@github.com/acme/widgets.git", "acme/widgets"),
        ("git://git.kernel.org/pub/scm/git.git", "scm/git"),
        ("git@github.com:acme/widgets.git", "acme/widgets"),
        ("git@github.com:acme/widgets", "acme/widgets"),
        ("github.com:acme/widgets.git", "acme/widgets"),
        ("git@gitea.example:/acme/widgets.git", "acme/widgets"),
        ("git@gitlab.com:group/subgroup/widgets.git", "subgroup/widgets"),
        ("https://gitlab.com/group/sub/deeper/widgets", "deeper/widgets"),
        ("https://GitHub.com/Acme/Widgets.GIT", "acme/widgets"),
        ("git@github.com:Acme/My_Repo.v2.git", "acme/my_repo.v2"),
        ("  https://github.com/acme/widgets.git\n", "acme/widgets"),
        ("https://dev.azure.com/org/project/_git/widgets", "project/widgets"),
        ("git@ssh.dev.azure.com:v3/org/project/widgets", "project/widgets"),
        # Names with a leading dot, as GitHub allows them.
        ("git@github.com:acme/.github.git", "acme/.github"),
        ("https://github.com/acme/.github", "acme/.github"),
        ("ssh://git@github.com/.acme/.dotfiles.git", ".acme/.dotfiles"),
        ("git@github.com:acme/...x.git", "acme/...x"),
    ],
)
def test_parse_remote_url_accepts_network_remotes(url: str, expected: str) -> None:
    assert parse_remote_url(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        "",
        "garbage",
        "https://github.com/acme",
        "https://github.com/",
        "https:///acme/widgets",
        "https://github.com:notaport/acme/widgets",
        "https://[::1/acme/widgets",
        "git@github.com:widgets.git",
        "git@github.com:acme/.git",
        "git@github.com:acme/../widgets",
        "git@github.com:acme/..git",
        "git@github.com:acme/...git",
        "git@github.com:./widgets.git",
        "https://github.com/../widgets",
        "https://github.com/acme/wid gets",
        "https://github.com/acme/wid%20gets",
        "/srv/git/acme/widgets.git",
        "./acme/widgets",
        "../acme/widgets",
        "~/src/acme/widgets",
        "acme/widgets",
        "file:///srv/git/acme/widgets.git",
        "file://localhost/srv/git/acme/widgets.git",
        "file:/srv/git/acme/widgets.git",
        "C:/src/acme/widgets",
        "C:\\src\\acme\\widgets",
        "\\\\server\\share\\acme\\widgets",
        "ftp://example.com/acme/widgets",
        "ext::ssh -o ProxyCommand=evil host/acme/widgets",
        "https://github.com/acme/widgets\nhttps://evil.example/x/y",
    ],
)
def test_parse_remote_url_refuses_local_paths_and_garbage(url: str) -> None:
    assert parse_remote_url(url) is None


# --- Claude Code's layout ----------------------------------------------------------


def test_default_team_dir_follows_claude_code_layout() -> None:
    assert default_team_dir(Path("/home/u/src/my.app"), Path("/home/u")) == Path(
        "/home/u/.claude/projects/-home-u-src-my-app/memory/team"
    )


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/home/u/src/my_project", "-home-u-src-my-project"),
        ("/home/u/My Repo+v2", "-home-u-My-Repo-v2"),
        ("/home/u/.worktrees/a-b", "-home-u--worktrees-a-b"),
        # Claude Code counts UTF-16 units: é is one, an emoji two (checked with node).
        ("/home/u/src/café 😀/x", "-home-u-src-caf-----x"),
    ],
)
def test_sanitize_path_turns_everything_but_ascii_letters_and_digits_into_dashes(
    path: str, expected: str
) -> None:
    assert sanitize_path(Path(path)) == expected


@pytest.mark.parametrize(
    ("path", "suffix"),
    [
        # Expected values computed with Claude Code's own JavaScript function under node.
        ("/home/u/" + "deeply_nested.dir/" * 12 + "café 😀", "-dv0hz1"),
        ("/srv/" + "x" * 230, "-2b9oxz"),
    ],
)
def test_sanitize_path_cuts_long_paths_like_claude_code(path: str, suffix: str) -> None:
    assert sanitize_path(Path(path)) == re.sub("[^A-Za-z0-9]", "-", path)[:200] + suffix


# --- refused team dirs -------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("team", "relative"),
        ("./team", "relative"),
        ("", "relative"),
        ("~", "home folder"),
        ("~/", "home folder"),
        ("~/.", "home folder"),
        ("~/..", "home folder"),
        ("~//", "home folder"),
        ("~/x/..", "home folder"),
        ("~/../..", "contains the home folder"),
        ("~bob/team", "~user"),
        ("/", "root"),
        ("/a", "root"),
        ("/ab", "root"),
        ("/ab/", "root"),
        ("/ab/cd/../..", "root"),
        ("C:\\", "drive root"),
        ("C:/", "drive root"),
        ("C:", "drive root"),
        ("\\\\server\\share", "UNC"),
        ("//server/share", "UNC"),
        ("/tmp/team\0/x", "NUL"),
    ],
)
def test_refused_team_dirs_say_why_on_one_line(raw: str, reason: str, home: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_team_dir(raw, home)
    message = str(caught.value)
    assert reason in message
    assert "refused" in message
    assert "\n" not in message
    assert "\0" not in message


def test_home_and_its_ancestors_are_refused(home: Path) -> None:
    for raw in (str(home), str(home) + "/", f"{home}/sub/.."):
        with pytest.raises(ConfigError, match="it is the home folder"):
            validate_team_dir(raw, home)
    for raw in (str(home.parent), str(home.parent.parent)):
        with pytest.raises(ConfigError, match="it contains the home folder"):
            validate_team_dir(raw, home)


def test_credentials_are_0600_whatever_the_umask(tmp_path: Path) -> None:
    tmp_path.joinpath("memsync").mkdir()
    previous = os.umask(0o277)
    try:
        path = write_credentials(tmp_path / "memsync", server=None, token=TOKEN)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("~/team", "{home}/team"),
        ("~/notes/../team/", "{home}/team"),
        ("/abc", "/abc"),
        ("/srv/memsync//team/./", "/srv/memsync/team"),
    ],
)
def test_accepted_team_dirs_are_absolute_and_normalized(
    raw: str, expected: str, home: Path
) -> None:
    assert validate_team_dir(raw, home) == Path(expected.format(home=home))


# --- credentials -------------------------------------------------------------------


def test_missing_credentials_read_as_empty(tmp_path: Path) -> None:
    assert read_credentials(tmp_path / "nowhere") == {}


def test_credentials_are_private_and_round_trip(tmp_path: Path) -> None:
    directory = tmp_path / "config" / "memsync"
    path = write_credentials(directory, server="https://Sync.Example.com/base/", token=TOKEN)
    assert path == directory / CREDENTIALS_FILE
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(directory.parent).st_mode) == 0o700
    assert read_credentials(directory) == {
        "server": "https://sync.example.com/base",
        "token": TOKEN,
    }
    assert os.listdir(directory) == [CREDENTIALS_FILE]


def test_credentials_merge_and_a_loose_file_is_made_private(tmp_path: Path) -> None:
    directory = tmp_path / "memsync"
    directory.mkdir()
    (directory / CREDENTIALS_FILE).write_text('server = "https://a.example"\n', encoding="utf-8")
    os.chmod(directory / CREDENTIALS_FILE, 0o644)
    write_credentials(directory, server=None, token=TOKEN)
    assert read_credentials(directory) == {"server": "https://a.example", "token": TOKEN}
    assert stat.S_IMODE(os.stat(directory / CREDENTIALS_FILE).st_mode) == 0o600
    write_credentials(directory, server="https://a.example/", token=None)
    assert read_credentials(directory) == {"server": "https://a.example", "token": TOKEN}
    write_credentials(directory, server=None, token=OTHER_TOKEN)
    assert read_credentials(directory)["token"] == OTHER_TOKEN
    assert sorted(os.listdir(directory)) == [CREDENTIALS_FILE]


def test_a_new_server_without_a_token_drops_the_old_servers_token(tmp_path: Path) -> None:
    write_credentials(tmp_path, server="https://a.example", token=TOKEN)
    write_credentials(tmp_path, server="https://b.example", token=None)
    assert read_credentials(tmp_path) == {"server": "https://b.example"}


def test_credentials_write_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = tmp_path / "memsync"
    write_credentials(directory, server="https://a.example", token=TOKEN)
    before = (directory / CREDENTIALS_FILE).read_bytes()

    def failing_replace(source: object, destination: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(ConfigError, match="cannot write"):
        write_credentials(directory, server=None, token=OTHER_TOKEN)
    assert (directory / CREDENTIALS_FILE).read_bytes() == before
    assert os.listdir(directory) == [CREDENTIALS_FILE]


def test_odd_characters_survive_the_toml_round_trip(tmp_path: Path) -> None:
    server = 'https://a.example/we"ird\\path'
    token = 'tok"en\\with#quote='
    write_credentials(tmp_path, server=server, token=token)
    assert read_credentials(tmp_path) == {"server": server, "token": token}


@pytest.mark.parametrize(
    "server",
    ["", "sync.example.com", "ftp://a.example", "https://", "https:///path", "https://a b.example",
     "https://user:pw@a.example", "https://a.example/?x=1", "https://a.example#top",
     "https://a.example:port", "javascript:alert(1)"],
)  # fmt: skip
def test_bad_server_urls_are_refused(tmp_path: Path, server: str) -> None:
    with pytest.raises(ConfigError, match="server"):
        write_credentials(tmp_path, server=server, token=None)
    assert not (tmp_path / CREDENTIALS_FILE).exists()


@pytest.mark.parametrize("token", ["", "mst_ab cd", "mst_abc\n", "tab\there", "tökén", "\x7f"])
def test_bad_tokens_are_refused_without_echoing_them(tmp_path: Path, token: str) -> None:
    with pytest.raises(ConfigError, match="token") as caught:
        write_credentials(tmp_path, server=None, token=token)
    if token.strip():
        assert token.strip() not in str(caught.value)
    assert not (tmp_path / CREDENTIALS_FILE).exists()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('server = "https://a.example\n', "not valid TOML"),
        ("token = 12\n", "must be a string"),
        ('sever = "https://a.example"\n', "unknown key 'sever'"),
        ("[profile]\ntoken = 'x'\n", "unknown key 'profile'"),
    ],
)
def test_malformed_credentials_are_a_config_error(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / CREDENTIALS_FILE).write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        read_credentials(tmp_path)
    with pytest.raises(ConfigError, match=message):
        write_credentials(tmp_path, server=None, token=TOKEN)


def test_unreadable_credentials_are_a_config_error(tmp_path: Path) -> None:
    (tmp_path / CREDENTIALS_FILE).mkdir()
    with pytest.raises(ConfigError, match="cannot read"):
        read_credentials(tmp_path)
    (tmp_path / "bad-utf8").mkdir()
    (tmp_path / "bad-utf8" / CREDENTIALS_FILE).write_bytes(b'token = "\xff"\n')
    with pytest.raises(ConfigError, match="not valid TOML"):
        read_credentials(tmp_path / "bad-utf8")


# --- folders -----------------------------------------------------------------------


def test_xdg_folders_and_their_fallbacks(tmp_path: Path) -> None:
    env = {"HOME": "/h/u", "XDG_CONFIG_HOME": "/c", "XDG_STATE_HOME": "/s"}
    assert config_home(env) == Path("/c/memsync")
    assert state_home(env) == Path("/s/memsync")
    # Unset, empty and relative XDG values fall back (the XDG spec ignores relative ones).
    for fallback_env in (
        {"HOME": "/h/u"},
        {"HOME": "/h/u", "XDG_CONFIG_HOME": "", "XDG_STATE_HOME": "rel"},
    ):
        assert config_home(fallback_env) == Path("/h/u/.config/memsync")
        assert state_home(fallback_env) == Path("/h/u/.local/state/memsync")
    # Without HOME in env, the process's home (pointed into tmp_path by the fixture).
    assert config_home({}) == tmp_path / "process-home" / ".config" / "memsync"


# --- git ---------------------------------------------------------------------------


def test_git_root_is_canonical_and_found_from_a_subfolder(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "real")
    (root / "a" / "b").mkdir(parents=True)
    (tmp_path / "link").symlink_to(root)
    assert git_root(tmp_path / "link" / "a" / "b") == root
    assert git_root(tmp_path) is None
    assert git_root(tmp_path / "missing") is None


def test_origin_url(tmp_path: Path) -> None:
    assert origin_url(make_repo(tmp_path / "a", "https://h.example/o/n.git")) == (
        "https://h.example/o/n.git"
    )
    assert origin_url(make_repo(tmp_path / "b")) is None
    assert origin_url(tmp_path) is None


def test_a_hanging_git_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def hang(*arguments: object, **options: object) -> None:
        raise subprocess.TimeoutExpired(["git"], 10)

    monkeypatch.setattr(subprocess, "run", hang)
    with pytest.raises(ConfigError, match="did not answer"):
        git_root(tmp_path)


def test_without_git_there_is_no_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    assert git_root(tmp_path) is None
    assert origin_url(tmp_path) is None


# --- resolution --------------------------------------------------------------------


@pytest.mark.usefixtures("logged_in")
def test_everything_derived_from_the_repo_and_the_users_login(
    repo: Path, env: dict[str, str], home: Path
) -> None:
    (repo / "docs").mkdir()
    resolved = resolve_in(repo / "docs", env)
    assert resolved.server == "https://creds.example"
    assert resolved.token == TOKEN
    assert resolved.repo == "acme/widgets"
    assert resolved.team_dir == default_team_dir(repo, home)
    assert resolved.team_dir == (
        home / ".claude" / "projects" / sanitize_path(repo) / "memory" / "team"
    )
    assert TOKEN not in repr(resolved)


@pytest.mark.usefixtures("logged_in")
def test_the_team_dir_comes_from_the_canonical_git_root(
    repo: Path, env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    (tmp_path / "shortcut").symlink_to(repo)
    assert resolve_in(tmp_path / "shortcut", env).team_dir == default_team_dir(repo, home)


@pytest.mark.usefixtures("logged_in")
def test_server_precedence_flag_env_config_credentials(repo: Path, env: dict[str, str]) -> None:
    # The token is given, so it goes with whichever server wins.
    write_user_config(env, 'server = "https://config.example"\n')
    env["MEMSYNC_SERVER"] = "https://env.example"
    assert resolve_in(repo, env, server="https://flag.example/", token=TOKEN).server == (
        "https://flag.example"
    )
    assert resolve_in(repo, env, token=TOKEN).server == "https://env.example"
    env["MEMSYNC_SERVER"] = ""
    assert resolve_in(repo, env, token=TOKEN).server == "https://config.example"
    write_user_config(env, 'repo = "acme/other"\n')
    assert resolve_in(repo, env).server == "https://creds.example"


@pytest.mark.usefixtures("logged_in")
def test_token_precedence_flag_env_credentials(repo: Path, env: dict[str, str]) -> None:
    env["MEMSYNC_TOKEN"] = OTHER_TOKEN
    assert resolve_in(repo, env, token="flag-token").token == "flag-token"
    assert resolve_in(repo, env).token == OTHER_TOKEN
    del env["MEMSYNC_TOKEN"]
    assert resolve_in(repo, env).token == TOKEN


@pytest.mark.usefixtures("logged_in")
def test_repo_precedence_flag_env_config_origin(repo: Path, env: dict[str, str]) -> None:
    write_user_config(env, 'repo = "Config/Repo"\n')
    env["MEMSYNC_REPO"] = "env/repo"
    assert resolve_in(repo, env, repo="Flag/Repo").repo == "flag/repo"
    assert resolve_in(repo, env).repo == "env/repo"
    del env["MEMSYNC_REPO"]
    assert resolve_in(repo, env).repo == "config/repo"
    write_user_config(env, "")
    assert resolve_in(repo, env).repo == "acme/widgets"


@pytest.mark.usefixtures("logged_in")
@pytest.mark.parametrize("name", ["acme/.github", ".acme/x", "Acme/.GitHub"])
def test_repo_names_with_a_leading_dot_are_accepted_from_flag_and_env(
    repo: Path, env: dict[str, str], name: str
) -> None:
    assert resolve_in(repo, env, repo=name).repo == name.lower()
    env["MEMSYNC_REPO"] = name
    assert resolve_in(repo, env).repo == name.lower()


@pytest.mark.usefixtures("logged_in")
def test_team_dir_precedence_flag_env_config_derived(
    repo: Path, env: dict[str, str], home: Path
) -> None:
    write_user_config(env, 'dir = "~/config-team"\n')
    env["MEMSYNC_DIR"] = "~/env-team"
    assert resolve_in(repo, env, team_dir="/srv/flag-team").team_dir == Path("/srv/flag-team")
    assert resolve_in(repo, env).team_dir == home / "env-team"
    del env["MEMSYNC_DIR"]
    assert resolve_in(repo, env).team_dir == home / "config-team"
    write_user_config(env, "")
    assert resolve_in(repo, env).team_dir == default_team_dir(repo, home)


@pytest.mark.usefixtures("logged_in")
def test_hostile_files_inside_the_repository_are_ignored(
    repo: Path, env: dict[str, str], home: Path
) -> None:
    hostile_toml = (
        'server = "https://evil.example"\ntoken = "mst_stolen"\n'
        'repo = "evil/loot"\ndir = "~/.ssh"\n'
    )
    hostile_env = (
        "MEMSYNC_SERVER=https://evil.example\nMEMSYNC_TOKEN=mst_stolen\n"
        "MEMSYNC_REPO=evil/loot\nMEMSYNC_DIR=~/.ssh\n"
    )
    team_dir = default_team_dir(repo, home)
    team_dir.mkdir(parents=True)
    for folder in (repo, repo / ".memsync", repo / ".config" / "memsync", team_dir):
        folder.mkdir(parents=True, exist_ok=True)
        for name in (".memsync.toml", "memsync.toml", CONFIG_FILE, CREDENTIALS_FILE):
            (folder / name).write_text(hostile_toml, encoding="utf-8")
        (folder / ".env").write_text(hostile_env, encoding="utf-8")
        (folder / ".memsyncrc").write_text(hostile_env, encoding="utf-8")
    resolved = resolve_in(repo, env)
    assert resolved.server == "https://creds.example"
    assert resolved.token == TOKEN
    assert resolved.repo == "acme/widgets"
    assert resolved.team_dir == team_dir


def test_the_saved_token_never_goes_to_another_server(repo: Path, env: dict[str, str]) -> None:
    write_credentials(config_home(env), server="https://creds.example", token=TOKEN)
    with pytest.raises(NoCredentials, match=r"is for https://creds\.example") as caught:
        resolve_in(repo, env, server="https://elsewhere.example")
    assert TOKEN not in str(caught.value)
    write_user_config(env, 'server = "https://config.example"\n')
    with pytest.raises(NoCredentials):
        resolve_in(repo, env)
    # The same server spelled differently is still the same server.
    assert resolve_in(repo, env, server="HTTPS://Creds.Example/").token == TOKEN


def test_a_saved_token_without_a_saved_server_goes_with_any_server(
    repo: Path, env: dict[str, str]
) -> None:
    write_credentials(config_home(env), server=None, token=TOKEN)
    resolved = resolve_in(repo, env, server="https://a.example")
    assert (resolved.server, resolved.token) == ("https://a.example", TOKEN)


def test_no_server_or_token_is_no_credentials(repo: Path, env: dict[str, str]) -> None:
    with pytest.raises(NoCredentials, match="MEMSYNC_SERVER") as caught:
        resolve_in(repo, env)
    assert "memsync login" in str(caught.value)
    with pytest.raises(NoCredentials, match="no token"):
        resolve_in(repo, env, server="https://a.example")
    env["MEMSYNC_SERVER"] = "https://a.example"
    with pytest.raises(NoCredentials, match="memsync login"):
        resolve_in(repo, env)


@pytest.mark.usefixtures("logged_in")
def test_no_remote_is_no_repo_identity(tmp_path: Path, env: dict[str, str]) -> None:
    bare = make_repo(tmp_path / "no-remote")
    with pytest.raises(NoRepoIdentity, match="no remote origin"):
        resolve_in(bare, env)
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    with pytest.raises(NoRepoIdentity, match="not inside a git repository"):
        resolve_in(outside, env)


@pytest.mark.usefixtures("logged_in")
def test_an_unusable_origin_is_no_repo_identity_and_is_not_echoed(
    tmp_path: Path, env: dict[str, str]
) -> None:
    garbage = make_repo(tmp_path / "garbage", "ext::ssh -o ProxyCommand=evil host/x/y")
    with pytest.raises(NoRepoIdentity, match="does not name host/owner/name"):
        resolve_in(garbage, env)
    leaky = make_repo(tmp_path / "leaky", "https://me:s3cr3t@git.example/widgets")
    with pytest.raises(NoRepoIdentity) as caught:
        resolve_in(leaky, env)
    assert "s3cr3t" not in str(caught.value)


@pytest.mark.usefixtures("logged_in")
def test_outside_a_repository_the_team_dir_must_be_given(
    tmp_path: Path, env: dict[str, str], home: Path
) -> None:
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    with pytest.raises(ConfigError, match="--dir") as caught:
        resolve_in(outside, env, repo="acme/widgets")
    assert type(caught.value) is ConfigError
    resolved = resolve_in(outside, env, repo="acme/widgets", team_dir="~/team")
    assert resolved.team_dir == home / "team"


@pytest.mark.usefixtures("logged_in")
@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("MEMSYNC_SERVER", "ftp://a.example", "MEMSYNC_SERVER: the server must be"),
        ("MEMSYNC_REPO", "not a repo", "MEMSYNC_REPO: repo must be owner/name"),
        ("MEMSYNC_REPO", "a/b/c", "MEMSYNC_REPO: repo must be owner/name"),
        ("MEMSYNC_REPO", "acme/..", "MEMSYNC_REPO: repo must be owner/name"),
        ("MEMSYNC_REPO", "./x", "MEMSYNC_REPO: repo must be owner/name"),
        ("MEMSYNC_DIR", "~", "MEMSYNC_DIR: team dir '~' is refused"),
        ("MEMSYNC_DIR", "relative/team", "MEMSYNC_DIR: team dir 'relative/team' is refused"),
        ("MEMSYNC_TOKEN", "two words", "MEMSYNC_TOKEN: the token must be"),
    ],
)
def test_bad_values_are_config_errors_naming_their_source(
    repo: Path, env: dict[str, str], variable: str, value: str, message: str
) -> None:
    env[variable] = value
    with pytest.raises(ConfigError, match=message) as caught:
        resolve_in(repo, env)
    assert type(caught.value) is ConfigError


@pytest.mark.usefixtures("logged_in")
def test_bad_user_config_names_the_file(repo: Path, env: dict[str, str]) -> None:
    path = write_user_config(env, 'dir = "~/.."\n')
    with pytest.raises(ConfigError, match="is refused") as caught:
        resolve_in(repo, env)
    assert str(path) in str(caught.value)
    write_user_config(env, 'token = "mst_x"\n')
    with pytest.raises(ConfigError, match="unknown key 'token'"):
        resolve_in(repo, env)


@pytest.mark.usefixtures("logged_in")
def test_state_dir_is_per_server_repo_and_team_dir(
    repo: Path, env: dict[str, str], tmp_path: Path
) -> None:
    resolved = resolve_in(repo, env)
    identity = f"{resolved.server}\n{resolved.repo}\n{resolved.team_dir}".encode()
    assert resolved.state_dir == (
        tmp_path / "xdg-state" / "memsync" / hashlib.sha256(identity).hexdigest()[:16]
    )
    assert resolve_in(repo, env).state_dir == resolved.state_dir
    others = {
        resolve_in(repo, env, server="https://other.example", token=TOKEN).state_dir,
        resolve_in(repo, env, repo="acme/other").state_dir,
        resolve_in(repo, env, team_dir="/srv/other-team").state_dir,
    }
    assert len(others) == 3
    assert resolved.state_dir not in others
    assert not resolved.team_dir.is_relative_to(resolved.state_dir)
    assert not resolved.state_dir.is_relative_to(resolved.team_dir)


# --- where the repo came from, and local-path remotes ----------------------------


@pytest.mark.usefixtures("logged_in")
def test_the_repo_records_where_it_came_from(repo: Path, env: dict[str, str]) -> None:
    assert resolve_in(repo, env).repo_source == "git remote origin git@github.com:Acme/Widgets.git"
    assert resolve_in(repo, env, repo="a/b").repo_source == "--repo"
    env["MEMSYNC_REPO"] = "c/d"
    assert resolve_in(repo, env).repo_source == "MEMSYNC_REPO"
    del env["MEMSYNC_REPO"]
    path = write_user_config(env, 'repo = "e/f"\n')
    assert resolve_in(repo, env).repo_source == str(path)


@pytest.mark.usefixtures("logged_in")
@pytest.mark.parametrize(
    ("origin", "shown"),
    [
        ("https://me:s3cr3t@git.example/acme/widgets.git", "https://git.example/acme/widgets.git"),
        ("https://ghp_abc123@github.com/acme/widgets", "https://github.com/acme/widgets"),
        ("ssh://git@git.example:2222/acme/widgets.git", "ssh://git.example:2222/acme/widgets.git"),
        ("git@github.com:acme/widgets.git", "git@github.com:acme/widgets.git"),
    ],
)
def test_the_remote_is_shown_without_its_user_or_password(
    tmp_path: Path, env: dict[str, str], origin: str, shown: str
) -> None:
    checkout = make_repo(tmp_path / "checkout", origin)
    resolved = resolve_in(checkout, env)
    assert resolved.repo == "acme/widgets"
    assert resolved.repo_source == f"git remote origin {shown}"


@pytest.mark.usefixtures("logged_in")
@pytest.mark.parametrize(
    ("origin", "shown"),
    [
        ("/srv/git/widgets.git", "/srv/git/widgets.git"),
        ("file:///srv/git/widgets.git", "/srv/git/widgets.git"),
        ("file://localhost/srv/git/widgets.git", "/srv/git/widgets.git"),
        ("file:/srv/git/widgets.git", "/srv/git/widgets.git"),
        ("../widgets.git", "../widgets.git"),
        ("./widgets", "./widgets"),
        ("~/src/widgets", "~/src/widgets"),
        ("widgets", "widgets"),
        ("C:/src/widgets", "C:/src/widgets"),
    ],
)
def test_a_local_path_origin_says_so_and_how_to_name_the_repo(
    tmp_path: Path, env: dict[str, str], origin: str, shown: str
) -> None:
    checkout = make_repo(tmp_path / "checkout", origin)
    with pytest.raises(NoRepoIdentity) as caught:
        resolve_in(checkout, env)
    assert str(caught.value) == (
        f"the git remote origin is a local path ({shown}), not a hosted repo:"
        " set MEMSYNC_REPO=owner/name so teammates share one memory"
    )
    assert caught.value.exit_code == 2


def test_parts_resolve_each_on_its_own(tmp_path: Path, env: dict[str, str]) -> None:
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    parts = resolve_parts(
        server=None, token=None, repo=None, team_dir="~/team", cwd=outside, env=env
    )
    assert isinstance(parts.server, NoCredentials)
    assert isinstance(parts.token, NoCredentials)
    assert isinstance(parts.repo, NoRepoIdentity)
    assert parts.team_dir == Path(env["HOME"]) / "team"
    with pytest.raises(NoCredentials, match="no server URL"):
        parts.config(env)
    env["MEMSYNC_REPO"] = "acme/x"
    parts = resolve_parts(
        server="https://a.example", token=TOKEN, repo=None, team_dir=None, cwd=outside, env=env
    )
    assert parts.server == "https://a.example"
    assert parts.token == TOKEN
    assert TOKEN not in repr(parts)
    assert parts.repo.name == "acme/x"  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="no team dir"):
        parts.config(env)


def test_a_malformed_user_file_fails_every_part_read_from_it(
    repo: Path, env: dict[str, str]
) -> None:
    write_user_config(env, "dir = [\n")
    parts = resolve_parts(
        server="https://a.example", token=TOKEN, repo=None, team_dir=None, cwd=repo, env=env
    )
    assert isinstance(parts.server, ConfigError)
    assert parts.token == TOKEN  # from the flag; the credentials file is fine
    assert isinstance(parts.repo, ConfigError)
    assert isinstance(parts.team_dir, ConfigError)


def test_remove_credentials_says_what_it_removed(tmp_path: Path) -> None:
    assert remove_credentials(tmp_path) is None
    path = write_credentials(tmp_path, server="https://a.example", token=TOKEN)
    assert remove_credentials(tmp_path) == (path, "https://a.example")
    assert not path.exists()
    assert remove_credentials(tmp_path) is None
    # A file it cannot read is removed all the same: logging out must always work.
    path.write_text("not toml [", encoding="utf-8")
    assert remove_credentials(tmp_path) == (path, None)
    assert not path.exists()
