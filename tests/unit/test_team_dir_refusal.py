"""Folders that are never a team dir: keys, credentials, the home folder and above.

`team_dir_refusal(path, home)` is tested with a home inside tmp_path; then that every
way of naming a team dir (--dir, MEMSYNC_DIR, config.toml, an enrolment) meets it, and
that `memsync doctor` shows it as a failed row with a fix.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import sync_client.config.team_dir as team_dir_module
from sync_client.config import (
    CONFIG_FILE,
    ENROLLED_FILE,
    Enrollment,
    RefusedTeamDir,
    config_home,
    enrolled_config,
    resolve,
    resolve_target,
    team_dir_refusal,
)
from sync_client.doctor import run_checks

TOKEN = "mst_" + "A" * 42
SERVER = "https://memsync.example.com"
# Only the first line matters to the check; the rest is not key material.
OPENSSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home" / "alice"
    path.mkdir(parents=True)
    return path


@pytest.fixture
def env(home: Path) -> dict[str, str]:
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "MEMSYNC_SERVER": SERVER,
        "MEMSYNC_TOKEN": TOKEN,
        "MEMSYNC_REPO": "acme/app",
    }


def reason(path: Path, home: Path) -> str | None:
    refusal = team_dir_refusal(path, home, memsync_config=home / ".config" / "memsync")
    return None if refusal is None else refusal.reason


# --- the folders themselves -----------------------------------------------------------


@pytest.mark.parametrize(
    ("relative", "why"),
    [
        (".ssh", "~/.ssh holds SSH keys and config"),
        (".gnupg", "~/.gnupg holds GnuPG keys"),
        (".aws", "~/.aws holds AWS credentials"),
        (".kube", "~/.kube holds Kubernetes credentials"),
        (".docker", "~/.docker holds Docker registry credentials"),
        (".config", "~/.config holds every program's settings"),
        (".config/gcloud", "~/.config/gcloud holds Google Cloud credentials"),
        (".config/gh", "~/.config/gh holds GitHub CLI tokens"),
        (".config/memsync", "~/.config/memsync holds memsync's own token"),
    ],
)
@pytest.mark.parametrize("exists", [True, False])
def test_credential_folders_are_refused_whether_or_not_they_exist(
    home: Path, relative: str, why: str, exists: bool
) -> None:
    folder = home / relative
    if exists:
        folder.mkdir(parents=True)
        (folder / "config").write_text("settings\n")
    found = reason(folder, home)
    assert found is not None
    assert found.startswith(why)


@pytest.mark.parametrize(
    "relative", [".ssh/team", ".aws/sub/team", ".config/gcloud/x", ".config/memsync/team"]
)
def test_a_folder_inside_a_credential_folder_is_refused(home: Path, relative: str) -> None:
    found = reason(home / relative, home)
    assert found is not None
    assert found.startswith("it is inside ~/.")


@pytest.mark.parametrize(
    "relative",
    [
        "team",
        "memsync/app",
        ".claude/projects/-src-app/memory/team",
        ".config/memsync-team",
        ".config/obsidian",
        ".sshfs",
        "ssh",
        ".ssh-team",
    ],
)
def test_other_folders_of_the_home_are_fine(home: Path, relative: str) -> None:
    folder = home / relative
    folder.mkdir(parents=True)
    (folder / "notes.md").write_text("a note\n")
    assert reason(folder, home) is None


def test_the_home_folder_and_every_folder_above_it_are_refused(home: Path) -> None:
    assert reason(home, home) == f"it resolves to the home folder ({home})"
    for above in (home.parent, home.parent.parent, Path("/")):
        found = reason(above, home)
        assert found is not None
        assert found.endswith("which holds the home folder")


# --- symlinks are resolved first ------------------------------------------------------


def test_a_symlink_to_a_credential_folder_or_the_home_is_that_folder(home: Path) -> None:
    (home / ".ssh").mkdir()
    links = home / "links"
    links.mkdir()
    (links / "ssh").symlink_to(home / ".ssh")
    (links / "home").symlink_to(home)
    (links / "root").symlink_to("/")
    (links / "inside").symlink_to(home / ".ssh" / "sub")
    assert reason(links / "ssh", home) == ("it resolves to ~/.ssh, which holds SSH keys and config")
    assert reason(links / "home", home) == f"it resolves to the home folder ({home})"
    assert reason(links / "root", home) == "it resolves to /, which holds the home folder"
    assert reason(links / "inside", home) == "it is inside ~/.ssh, which holds SSH keys and config"


def test_a_folder_holding_where_a_credential_folder_really_is_is_refused(home: Path) -> None:
    # Dotfiles kept in a folder of their own, linked into the home: a scan of that
    # folder would walk into the keys.
    dotfiles = home / "dotfiles"
    (dotfiles / "aws").mkdir(parents=True)
    (home / ".aws").symlink_to(dotfiles / "aws")
    assert reason(dotfiles, home) == (
        f"it holds ~/.aws ({dotfiles / 'aws'}), which holds AWS credentials"
    )
    assert reason(dotfiles / "aws", home) == "it resolves to ~/.aws, which holds AWS credentials"
    (dotfiles / "notes").mkdir()
    assert reason(dotfiles / "notes", home) is None


def test_a_home_reached_through_a_symlink_is_still_the_home(tmp_path: Path) -> None:
    real_home = tmp_path / "real-home"
    (real_home / ".ssh").mkdir(parents=True)
    linked_home = tmp_path / "home-link"
    linked_home.symlink_to(real_home)
    assert reason(real_home / ".ssh", linked_home) == (
        "it resolves to ~/.ssh, which holds SSH keys and config"
    )
    assert reason(real_home, linked_home) == f"it resolves to the home folder ({real_home})"
    assert reason(real_home / "team", linked_home) is None


# --- a folder holding a private key ---------------------------------------------------


@pytest.mark.parametrize(
    "first_line",
    [
        "-----BEGIN OPENSSH PRIVATE KEY-----",
        "-----BEGIN RSA PRIVATE KEY-----",
        "-----BEGIN EC PRIVATE KEY-----",
        "-----BEGIN DSA PRIVATE KEY-----",
        "-----BEGIN PRIVATE KEY-----",
        "-----BEGIN ENCRYPTED PRIVATE KEY-----",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----",
        "\ufeff-----BEGIN PRIVATE KEY-----",
    ],
)
def test_a_file_starting_with_a_private_key_header_refuses_its_folder(
    home: Path, first_line: str
) -> None:
    team = home / "team"
    team.mkdir()
    (team / "notes.md").write_text("a note\n")
    (team / "deploy").write_text(f"{first_line}\nAAAA\n", encoding="utf-8")
    refusal = team_dir_refusal(team, home)
    assert refusal is not None
    assert refusal.reason == "it holds a private key (deploy)"
    assert refusal.private_key == team / "deploy"
    assert refusal.fix.startswith("move the key out of it, or choose another team dir")


@pytest.mark.parametrize(
    "name", ["id_rsa", "id_ed25519", "id_ecdsa", "id_dsa", "id_ed25519_sk", "id_ecdsa_sk"]
)
def test_a_file_named_like_an_ssh_key_refuses_its_folder_whatever_it_holds(
    home: Path, name: str
) -> None:
    keys = home / "backup"
    keys.mkdir()
    (keys / name).write_bytes(b"")
    assert reason(keys, home) == f"it holds a private key ({name})"


def test_what_only_looks_like_a_key_does_not_refuse_a_folder(home: Path) -> None:
    team = home / "team"
    team.mkdir()
    (team / "id_ed25519.pub").write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI alice@laptop\n")
    (team / "known_hosts").write_text("github.com ssh-ed25519 AAAAC3Nza\n")
    (team / "cert.pem").write_text("-----BEGIN CERTIFICATE-----\nMIIB\n")
    (team / "public.pem").write_text("-----BEGIN PUBLIC KEY-----\nMIIB\n")
    (team / "later.txt").write_text("x" * 120 + "\n-----BEGIN PRIVATE KEY-----\n")
    (team / "quoted.txt").write_text("see -----BEGIN PRIVATE KEY----- in the docs\n")
    (team / "lower.txt").write_text("-----begin private key-----\n")
    # A note is the secret scanner's to judge (a push skips it), not a key folder.
    (team / "how-to-rotate.md").write_text(OPENSSH_KEY)
    (team / "id_rsa.md").write_text("how we name keys\n")
    # Never followed, never sent: a symlink or a folder named like a key.
    (team / "id_rsa").symlink_to(home / "elsewhere")
    (team / "id_dsa").mkdir()
    (team / "sub").mkdir()
    (team / "sub" / "deploy").write_text(OPENSSH_KEY)  # below the top: not looked at
    os.mkfifo(team / "pipe")  # opened without blocking, then left alone
    assert reason(team, home) is None


def test_the_look_for_a_key_is_bounded(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    team = home / "team"
    team.mkdir()
    for number in range(300):
        (team / f"file-{number:03}.txt").write_text("x" * 1000)
    (team / "big.bin").write_bytes(b"y" * 1_000_000)
    opened: list[str] = []
    sizes: list[int] = []
    real_starts = team_dir_module._starts_like_a_key
    real_read = os.read

    def counting_starts(folder_fd: int, name: str) -> bool:
        opened.append(name)
        return real_starts(folder_fd, name)

    def counting_read(fd: int, size: int) -> bytes:
        sizes.append(size)
        return real_read(fd, size)

    monkeypatch.setattr(team_dir_module, "_starts_like_a_key", counting_starts)
    monkeypatch.setattr(os, "read", counting_read)
    assert reason(team, home) is None
    assert len(opened) == 200
    assert sizes
    assert max(sizes) <= 100


def test_a_missing_team_dir_is_fine_until_it_exists(home: Path) -> None:
    assert reason(home / "memsync" / "app", home) is None
    assert reason(home / "memsync" / "app.md", home) is None


# --- every way of naming a team dir meets it ------------------------------------------


def test_memsync_dir_dir_flag_and_config_file_are_all_refused_on_one_line(
    home: Path, env: dict[str, str]
) -> None:
    (home / ".ssh").mkdir()
    env["MEMSYNC_DIR"] = "~/.ssh"
    with pytest.raises(RefusedTeamDir) as caught:
        resolve(server=None, token=None, repo=None, team_dir=None, cwd=home, env=env)
    assert str(caught.value) == (
        "MEMSYNC_DIR: team dir '~/.ssh' is refused: ~/.ssh holds SSH keys and config;"
        " choose another team dir (--dir or MEMSYNC_DIR)"
    )
    assert caught.value.exit_code == 2
    assert caught.value.as_json()["type"] == "config"
    with pytest.raises(RefusedTeamDir, match=r"^--dir: team dir '.*/\.gnupg' is refused"):
        resolve(
            server=None, token=None, repo=None, team_dir=str(home / ".gnupg"), cwd=home, env=env
        )
    del env["MEMSYNC_DIR"]
    config_file = config_home(env) / CONFIG_FILE
    config_file.parent.mkdir(parents=True)
    config_file.write_text('dir = "~/.kube"\n')
    with pytest.raises(RefusedTeamDir) as from_file:
        resolve(server=None, token=None, repo=None, team_dir=None, cwd=home, env=env)
    assert str(from_file.value).startswith(f"{config_file}: team dir '~/.kube' is refused")
    assert "\n" not in str(from_file.value)


def test_an_enrolment_names_its_entry_and_disable_still_finds_it(
    home: Path, env: dict[str, str]
) -> None:
    keys = home / "keys"
    keys.mkdir()
    (keys / "id_ed25519").write_text(OPENSSH_KEY)
    item = Enrollment(server=SERVER, repo="acme/app", team_dir=keys)
    with pytest.raises(RefusedTeamDir) as caught:
        enrolled_config(item, token=TOKEN, env=env)
    assert str(caught.value).startswith(
        f"{config_home(env) / ENROLLED_FILE}: acme/app: team dir '{keys}' is refused:"
        " it holds a private key (id_ed25519); move the key out of it"
    )
    # `memsync enable` refuses it; `memsync disable` must still be able to turn it off.
    with pytest.raises(RefusedTeamDir):
        resolve_target(server=None, repo=None, team_dir=str(keys), cwd=home, env=env)
    assert resolve_target(
        server=None,
        repo=None,
        team_dir=str(keys),
        cwd=home,
        env=env,
        require_server=False,
        require_team_dir=False,
    ) == (SERVER, "acme/app", keys)


def test_doctor_shows_a_refused_team_dir_as_a_failed_row_with_a_fix(
    home: Path, env: dict[str, str]
) -> None:
    del env["MEMSYNC_SERVER"]  # no server to ask: the rows that need one are skipped
    keys = home / "keys"
    keys.mkdir()
    (keys / "deploy").write_text(OPENSSH_KEY)
    for team_dir, detail, fix in (
        (
            "~/.aws",
            "MEMSYNC_DIR: team dir '~/.aws' is refused: ~/.aws holds AWS credentials",
            "export MEMSYNC_DIR=/absolute/folder (a folder of its own, e.g. ~/memsync/app)",
        ),
        (
            str(keys),
            f"MEMSYNC_DIR: team dir '{keys}' is refused: it holds a private key (deploy)",
            f"move {keys / 'deploy'} out of that folder, or export MEMSYNC_DIR=",
        ),
    ):
        env["MEMSYNC_DIR"] = team_dir
        result = run_checks({}, cwd=home, env=env)
        rows = {row["check"]: row for row in result["checks"]}
        assert result["ok"] is False
        assert rows["team dir"]["ok"] is False
        assert rows["team dir"]["detail"] == detail
        assert rows["team dir"]["fix"].startswith(fix)
        assert rows["index"]["detail"] == "skipped: needs a team dir"
