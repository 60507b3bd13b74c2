"""`files.own` and `files.save_new` in a directory the code controls: no link followed.

Run as root, as the server does (ownership changes need it).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolrelay.adapters.code import files

UID = 4_000_123


def owner(path: Path) -> int:
    return path.lstat().st_uid


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A host directory with a file: what a planted link points at."""
    folder = tmp_path / "host"
    folder.mkdir()
    (folder / "secret").write_text("host")
    return folder


def test_own_gives_the_tree_and_follows_no_symlink(tmp_path: Path, host: Path) -> None:
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "sub" / "data.txt").write_text("mine")
    (work / "to-dir").symlink_to(host)
    (work / "sub" / "to-file").symlink_to(host / "secret")
    files.own(work, UID, UID)
    assert {owner(work), owner(work / "sub"), owner(work / "sub" / "data.txt")} == {UID}
    assert owner(work / "to-dir") == UID  # the link itself, not what it names
    assert owner(host) == 0 and owner(host / "secret") == 0


def test_own_refuses_a_top_that_is_a_symlink(tmp_path: Path, host: Path) -> None:
    link = tmp_path / "work"
    link.symlink_to(host)
    with pytest.raises(OSError):
        files.own(link, UID, UID)
    assert owner(host) == 0 and owner(host / "secret") == 0


def test_own_leaves_a_file_with_another_hard_link_alone(tmp_path: Path, host: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    os.link(host / "secret", work / "other-name")
    files.own(work, UID, UID)
    assert owner(work) == UID
    assert owner(host / "secret") == 0


def test_own_of_a_missing_directory_does_nothing(tmp_path: Path) -> None:
    files.own(tmp_path / "gone", UID, UID)


def test_save_new_writes_a_new_file_and_gives_it_away(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    files.save_new(work, "outputs", "1.png", b"png", (UID, UID))
    assert (work / "outputs" / "1.png").read_bytes() == b"png"
    assert owner(work / "outputs") == owner(work / "outputs" / "1.png") == UID
    with pytest.raises(FileExistsError):
        files.save_new(work, "outputs", "1.png", b"again", (UID, UID))
    assert (work / "outputs" / "1.png").read_bytes() == b"png"


def test_save_new_follows_no_planted_link(tmp_path: Path, host: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "outputs").symlink_to(host)
    with pytest.raises(OSError):
        files.save_new(work, "outputs", "1.png", b"png", (UID, UID))
    real = tmp_path / "real"
    real.mkdir()
    (real / "outputs").mkdir()
    (real / "outputs" / "1.png").symlink_to(host / "secret")
    with pytest.raises(FileExistsError):  # O_EXCL: a link in the file's place is not opened
        files.save_new(real, "outputs", "1.png", b"png", (UID, UID))
    assert sorted(p.name for p in host.iterdir()) == ["secret"]
    assert (host / "secret").read_text() == "host" and owner(host) == 0
