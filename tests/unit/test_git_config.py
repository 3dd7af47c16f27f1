"""The checkout's identity read from git's files: always what git itself says.

`config.git_root` and `config.origin_url` read `.git` and the config files instead of
running git when they can (`_read_checkout`); each test builds a real checkout in a
temp dir and compares with `git rev-parse --show-toplevel` / `git remote get-url origin`.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sync_client import config
from sync_client.config import git_config_path, git_root, origin_url

IDENTITY = ["-c", "user.name=Test", "-c", "user.email=test@example.invalid"]


@pytest.fixture(autouse=True)
def own_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME of the test's own, so only the configs written here (and the system's) count."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    return home


def git(cwd: Path, *arguments: str) -> str:
    """Run git in `cwd`; its output without the last newline."""
    done = subprocess.run(
        ["git", *arguments], cwd=cwd, capture_output=True, text=True, check=True, timeout=30
    )
    return done.stdout.removesuffix("\n")


def git_says(cwd: Path) -> tuple[Path | None, str | None]:
    """(top folder, origin URL) as git reports them; None where git fails."""
    answers: list[str | None] = []
    for arguments in (("rev-parse", "--show-toplevel"), ("remote", "get-url", "origin")):
        done = subprocess.run(["git", *arguments], cwd=cwd, capture_output=True, text=True)
        output = done.stdout.removesuffix("\n")
        answers.append(output if done.returncode == 0 and output else None)
    top, url = answers
    return (Path(top).resolve() if top else None), (url.strip() if url else None)


def assert_as_git(cwd: Path, *, read: bool = True) -> None:
    """memsync's answers equal git's; with `read`, they come from the files (no git)."""
    if read:
        assert config._read_checkout(cwd) is not None
        assert read_origin(cwd) == git_says(cwd)[1]
    assert (git_root(cwd), origin_url(cwd)) == git_says(cwd)


def read_origin(cwd: Path) -> str | None:
    """The origin URL from the files alone (raises `_AskGit` where git must answer)."""
    checkout = config._read_checkout(cwd)
    return None if checkout is None else config._origin_from_config(checkout)


def new_repo(path: Path, origin: str | None = None) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    if origin is not None:
        git(path, "remote", "add", "origin", origin)
    return path


def commit(path: Path) -> None:
    (path / "README.md").write_text("hello\n", encoding="utf-8")
    git(path, "add", "README.md")
    git(path, *IDENTITY, "commit", "-q", "-m", "first")


def test_plain_checkout_from_its_root_and_a_subfolder(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "app", "https://github.com/Acme/App.git")
    (repo / "src" / "deep").mkdir(parents=True)
    assert_as_git(repo)
    assert_as_git(repo / "src" / "deep")
    assert git_root(repo / "src") == repo.resolve()
    assert origin_url(repo) == "https://github.com/Acme/App.git"
    assert git_config_path(repo / "src") == (repo / ".git" / "config").resolve()


def test_no_origin(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "app")
    git(repo, "remote", "add", "upstream", "https://github.com/acme/app.git")
    assert_as_git(repo)
    assert origin_url(repo) is None
    assert git_root(repo) == repo.resolve()


def test_outside_any_checkout(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    assert_as_git(folder, read=False)
    assert git_root(folder) is None
    assert origin_url(folder) is None


def test_worktree_has_a_git_file(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "app", "git@github.com:acme/app.git")
    commit(repo)
    git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "feature"))
    feature = tmp_path / "feature"
    assert (feature / ".git").is_file()
    assert_as_git(feature)
    assert git_root(feature) == feature.resolve()
    assert origin_url(feature) == "git@github.com:acme/app.git"
    # Worktrees share the main checkout's config.
    assert git_config_path(feature) == (repo / ".git" / "config").resolve()


def test_submodule_checkout(tmp_path: Path) -> None:
    source = new_repo(tmp_path / "lib-source")
    commit(source)
    outer = new_repo(tmp_path / "outer", "https://gitlab.com/acme/outer.git")
    commit(outer)
    git(outer, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(source), "lib")
    lib = outer / "lib"
    assert (lib / ".git").is_file()
    git(lib, "remote", "set-url", "origin", "https://gitlab.com/acme/lib.git")
    assert_as_git(lib)
    assert git_root(lib) == lib.resolve()
    assert origin_url(lib) == "https://gitlab.com/acme/lib.git"
    assert_as_git(outer)


def test_insteadof_rewrites_longest_prefix_from_every_level(tmp_path: Path, own_home: Path) -> None:
    (own_home / ".gitconfig").write_text(
        '[url "https://github.com/"]\n\tinsteadOf = gh:\n', encoding="utf-8"
    )
    repo = new_repo(tmp_path / "app", "gh:acme/app")
    assert_as_git(repo)
    assert origin_url(repo) == "https://github.com/acme/app"
    # A longer prefix in the repository's own config wins.
    git(repo, "config", "url.ssh://git@github.example.com/.insteadOf", "gh:acme/")
    assert_as_git(repo)
    assert origin_url(repo) == "ssh://git@github.example.com/app"


def test_insteadof_in_xdg_config(tmp_path: Path, own_home: Path) -> None:
    (own_home / ".config" / "git").mkdir(parents=True)
    (own_home / ".config" / "git" / "config").write_text(
        '[url "git@gitlab.com:"]\n    insteadof = "work:"\n', encoding="utf-8"
    )
    repo = new_repo(tmp_path / "app", "work:team/notes.git")
    assert_as_git(repo)
    assert origin_url(repo) == "git@gitlab.com:team/notes.git"


def test_quoted_values_comments_and_continuations(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "app")
    with (repo / ".git" / "config").open("a", encoding="utf-8") as file:
        file.write(
            "# a comment\n"
            '[remote "origin"] ; a comment after the header\n'
            '\turl   =  "https://github.com/acme/we#ird.git" ; the rest is a comment\n'
            '\tfetch = +refs/heads/*:refs/remotes/origin/*  # "quoted" in a comment\n'
            "[Core]\n"
            "\tFileMode\n"
            '[url "https://github.com/acme/we\\"x"]\n'
            "\tinsteadOf = https://github.com/acme/\\\n"
            "we#\n"
        )
    assert_as_git(repo)
    # `#` outside quotes starts a comment, also on a continued line.
    assert origin_url(repo) == 'https://github.com/acme/we"x#ird.git'


def test_old_style_subsection_header(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "app")
    with (repo / ".git" / "config").open("a", encoding="utf-8") as file:
        file.write("[remote.ORIGIN]\n\turl = https://github.com/acme/old.git\n")
    assert_as_git(repo)
    assert origin_url(repo) == "https://github.com/acme/old.git"


def test_remote_names_are_case_sensitive(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "app", "https://github.com/acme/right.git")
    with (repo / ".git" / "config").open("a", encoding="utf-8") as file:
        file.write('[REMOTE "Origin"]\n\tURL = https://github.com/acme/wrong.git\n')
    assert_as_git(repo)
    assert origin_url(repo) == "https://github.com/acme/right.git"


@pytest.mark.parametrize(
    "extra",
    [
        "[include]\n\tpath = other.config\n",
        '[includeIf "gitdir:~/"]\n\tpath = other.config\n',
        "[extensions]\n\tworktreeConfig = true\n",
        '[remote "origin"]\n\turl = https://github.com/acme/second.git\n',
    ],
    ids=["include", "includeIf", "extensions", "two-urls"],
)
def test_what_the_reader_does_not_parse_is_asked_of_git(tmp_path: Path, extra: str) -> None:
    repo = new_repo(tmp_path / "app", "https://github.com/acme/app.git")
    (repo / ".git" / "other.config").write_text(
        '[url "https://gitlab.com/"]\n\tinsteadOf = https://github.com/\n', encoding="utf-8"
    )
    with (repo / ".git" / "config").open("a", encoding="utf-8") as file:
        file.write(extra)
    with pytest.raises(config._AskGit):
        read_origin(repo)
    assert_as_git(repo, read=False)


def test_git_variables_send_the_question_to_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = new_repo(tmp_path / "app", "https://github.com/acme/app.git")
    other = new_repo(tmp_path / "other", "https://github.com/acme/other.git")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    with pytest.raises(config._AskGit):
        config._read_checkout(repo)
    assert_as_git(repo, read=False)
    assert origin_url(repo) == "https://github.com/acme/other.git"


def test_inside_the_git_dir_is_asked_of_git(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "app", "https://github.com/acme/app.git")
    with pytest.raises(config._AskGit):
        config._read_checkout(repo / ".git" / "refs")
    assert_as_git(repo / ".git" / "refs", read=False)


def test_parser_values() -> None:
    # What `git config -f FILE --list` says of the same text.
    entries = config._parse_git_config(
        '[a "Sub \\"x\\""]\n'
        "  key = one  two\t three \n"
        "  flag\n"
        '  quoted = " kept  " outside\n'
        "  escapes = tab\\there\\\\ \\n\n"
        "[b.C]\n"
        "  long = first \\\n"
        "second\n"
    )
    assert entries == [
        ("a", 'Sub "x"', "key", "one  two  three"),
        ("a", 'Sub "x"', "flag", None),
        ("a", 'Sub "x"', "quoted", " kept   outside"),
        ("a", 'Sub "x"', "escapes", "tab\there\\ \n"),
        ("b", "c", "long", "first second"),
    ]


@pytest.mark.parametrize(
    "text",
    ['[a]\n k = "open\n', "[a\n", "key = outside a section\n", "[a]\n k = bad\\q\n"],
)
def test_parser_hands_malformed_files_to_git(text: str) -> None:
    with pytest.raises(config._AskGit):
        config._parse_git_config(text)
