"""acxfs.safe.dirs: no write ever goes through a link or replaces what acxfs did not make.

The attacks run as root in a world-writable, non-sticky directory, with the attacker's moves
made by a child process running as `nobody` at the step boundary they target (the module's
`_checkpoint`), so each move is one another user really can make there.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from acxfs.errors import UnsafePathError
from acxfs.safe import _ops as safe_ops
from acxfs.safe import dirs as safe_dirs
from acxfs.safe import files as safe_files
from acxfs.safe import links as safe_links
from tests.support.attacker import NOBODY, as_nobody, assert_secret_untouched

LONG = "n" * 255

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the attacks need root and nobody")


@pytest.fixture
def dirfd(shared: Path) -> Iterator[int]:
    fd = safe_dirs.open_dir(shared)
    try:
        yield fd
    finally:
        os.close(fd)


def temp_entries(directory: Path) -> list[str]:
    return [name for name in os.listdir(directory) if name.startswith(".acxfs-")]


def at_step(monkeypatch: pytest.MonkeyPatch, wanted: str, action: Callable[[], None]) -> list[str]:
    """Run `action` once, when safe_fs reaches the step `wanted`; the steps reached."""
    seen: list[str] = []

    def checkpoint(step: str) -> None:
        seen.append(step)
        if step == wanted and seen.count(step) == 1:
            action()

    monkeypatch.setattr(safe_ops, "_checkpoint", checkpoint)
    return seen


@pytest.fixture(params=["renameat2", "no-renameat2"])
def renames(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with renameat2, and again as where it answers ENOSYS (seccomp, old kernel)."""
    if request.param == "no-renameat2":
        def unsupported(old_dirfd: int, old: str, new_dirfd: int, new: str, flags: int) -> None:
            raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS), new)

        monkeypatch.setattr(safe_ops, "_renameat2", unsupported)
    return str(request.param)


def _write_new(dirfd: int, name: str) -> None:
    safe_files.write_new_at(dirfd, name, b"new bytes", 0o644)


def _replace(dirfd: int, name: str) -> None:
    safe_files.replace_file_at(dirfd, name, b"new bytes", 0o644)


def _copy(dirfd: int, name: str) -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, b"new bytes")
    os.close(write_end)
    try:
        safe_files.copy_fd_at(dirfd, name, read_end, 0o644).commit()
    finally:
        os.close(read_end)


WRITERS: dict[str, Callable[[int, str], None]] = {
    "write_new_at": _write_new, "replace_file_at": _replace, "copy_fd_at": _copy,
}


# --- planted links ------------------------------------------------------------------------


@root_only
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_symlink_planted_at_the_temp_name_is_never_written_through(
    writer: str, shared: Path, secret: Path, dirfd: int, renames: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    as_nobody(lambda: os.symlink(secret / "victim", shared / ".acxfs-planted.tmp"))
    names = iter([".acxfs-planted.tmp"])
    real = safe_ops._temp_name
    monkeypatch.setattr(safe_ops, "_temp_name", lambda: next(names, None) or real())
    WRITERS[writer](dirfd, "out")
    assert (shared / "out").read_bytes() == b"new bytes"
    assert not (shared / "out").is_symlink()
    assert os.readlink(shared / ".acxfs-planted.tmp") == str(secret / "victim")
    assert temp_entries(shared) == [".acxfs-planted.tmp"]
    assert_secret_untouched(secret)


@root_only
@pytest.mark.parametrize("writer", ["write_new_at", "copy_fd_at"])
def test_symlink_planted_at_the_destination_is_refused_not_followed(
    writer: str, shared: Path, secret: Path, dirfd: int, renames: str,
) -> None:
    as_nobody(lambda: os.symlink(secret / "victim", shared / "out"))
    with pytest.raises(FileExistsError):
        WRITERS[writer](dirfd, "out")
    assert os.readlink(shared / "out") == str(secret / "victim")
    assert os.listdir(shared) == ["out"]
    assert_secret_untouched(secret)


@root_only
def test_dangling_symlink_at_the_destination_is_refused(
    shared: Path, secret: Path, dirfd: int, renames: str,
) -> None:
    as_nobody(lambda: os.symlink(secret / "new-file", shared / "out"))
    with pytest.raises(FileExistsError):
        safe_files.write_new_at(dirfd, "out", b"new bytes", 0o644)
    with pytest.raises(FileExistsError):
        safe_links.symlink_new_at(dirfd, "out", "elsewhere")
    with pytest.raises(FileExistsError), safe_files.open_new_dir_at(dirfd, "out") as staging:
        staging.commit()
    assert os.listdir(shared) == ["out"]
    assert_secret_untouched(secret)


@root_only
def test_replace_file_at_replaces_a_planted_link_and_never_writes_through_it(
    shared: Path, secret: Path, dirfd: int,
) -> None:
    as_nobody(lambda: os.symlink(secret / "victim", shared / "state.json"))
    safe_files.replace_file_at(dirfd, "state.json", b"{}", 0o600)
    assert not (shared / "state.json").is_symlink()
    assert (shared / "state.json").read_bytes() == b"{}"
    assert os.listdir(shared) == ["state.json"]
    assert_secret_untouched(secret)


@root_only
@pytest.mark.parametrize("depth", ["last", "intermediate"])
def test_symlink_planted_as_a_directory_on_the_way_is_refused(
    depth: str, shared: Path, secret: Path,
) -> None:
    as_nobody(lambda: os.symlink(secret, shared / "sub"))
    path = shared / "sub" if depth == "last" else shared / "sub" / "deeper"
    with pytest.raises(UnsafePathError, match="symbolic link"):
        os.close(safe_dirs.open_dir(path))
    with pytest.raises(UnsafePathError, match="symbolic link"):
        safe_dirs.make_dirs(shared / "sub" / "new" / "deeper").close()
    with pytest.raises(UnsafePathError, match="symbolic link"):  # nobody's link, not followed
        os.close(safe_dirs.open_dir(path, allow_user_symlink=True))
    assert_secret_untouched(secret)


@root_only
def test_directory_swapped_for_a_symlink_between_mkdir_and_open_is_refused(
    shared: Path, secret: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    def swap() -> None:
        def move() -> None:
            os.rename(shared / "new", shared / "moved")
            os.symlink(secret, shared / "new")

        as_nobody(move)

    seen = at_step(monkeypatch, "make_dirs_at:open", swap)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        safe_dirs.make_dirs(shared / "new" / "deeper").close()
    assert "make_dirs_at:open" in seen
    assert os.listdir(shared / "moved") == []
    assert_secret_untouched(secret)


@root_only
def test_temp_file_swapped_for_a_symlink_before_the_rename_is_refused(
    shared: Path, secret: Path, dirfd: int, renames: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    def swap() -> None:
        (temp,) = temp_entries(shared)

        def move() -> None:
            os.rename(shared / temp, shared / "mine")
            os.symlink(secret / "victim", shared / temp)

        as_nobody(move)

    at_step(monkeypatch, "commit:rename", swap)
    if renames == "renameat2":  # the rename moved their link: given back, and refused
        with pytest.raises(UnsafePathError, match="replaced by another process"):
            safe_files.write_new_at(dirfd, "out", b"new bytes", 0o644)
        assert not os.path.lexists(shared / "out")
    else:  # the link through /proc/self/fd names the inode written, wherever it was moved
        safe_files.write_new_at(dirfd, "out", b"new bytes", 0o644)
        assert not (shared / "out").is_symlink()
        assert (shared / "out").read_bytes() == b"new bytes"
    (planted,) = temp_entries(shared)
    assert os.readlink(shared / planted) == str(secret / "victim")  # given back as it was
    assert_secret_untouched(secret)


@root_only
def test_staging_directory_swapped_before_the_rename_is_refused(
    shared: Path, secret: Path, dirfd: int, renames: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    def swap() -> None:
        (temp,) = temp_entries(shared)

        def move() -> None:
            os.rename(shared / temp, shared / "theirs-now")
            os.mkdir(shared / temp)
            os.symlink(secret / "victim", shared / temp / "file")

        as_nobody(move)

    at_step(monkeypatch, "commit:rename", swap)
    with pytest.raises(UnsafePathError, match="replaced by another process"), \
            safe_files.open_new_dir_at(dirfd, "dest", 0o755) as staging:
        safe_files.write_new_at(staging.fd, "file", b"extracted", 0o644)
        staging.commit()
    assert not os.path.lexists(shared / "dest")
    (planted,) = temp_entries(shared)
    assert os.readlink(shared / planted / "file") == str(secret / "victim")
    assert os.listdir(shared / "theirs-now") == []  # ours, emptied through its descriptor
    assert_secret_untouched(secret)


# --- links acxfs made ---------------------------------------------------------------------


def _user_file(path: Path) -> None:
    path.write_bytes(b"the user's own skill\n")


def _user_dir(path: Path) -> None:
    path.mkdir()
    (path / "SKILL.md").write_bytes(b"the user's own skill\n")


def _other_link(path: Path) -> None:
    os.symlink("../elsewhere/skill", path)


SWAPS: dict[str, Callable[[Path], None]] = {
    "regular-file": _user_file, "directory": _user_dir, "link-to-another-target": _other_link,
}


def assert_user_entry(kind: str, path: Path) -> None:
    if kind == "regular-file":
        assert path.read_bytes() == b"the user's own skill\n" and not path.is_symlink()
    elif kind == "directory":
        assert (path / "SKILL.md").read_bytes() == b"the user's own skill\n"
        assert not path.is_symlink()
    else:
        assert os.readlink(path) == "../elsewhere/skill"


OLD = "../../.agents/skills/demo"
NEW = "../../acxfs/mnt/demo/1.0-abc/demo"


def swapped_at_step(monkeypatch: pytest.MonkeyPatch, step: str, kind: str, link: Path) -> list[str]:
    """`link` made as acxfs's link to OLD, then replaced by an entry of `kind` when safe_fs
    reaches `step`; the steps reached."""
    os.symlink(OLD, link)

    def swap() -> None:
        os.unlink(link)
        SWAPS[kind](link)

    return at_step(monkeypatch, step, swap)


@pytest.mark.parametrize("kind", sorted(SWAPS))
def test_replace_symlink_at_never_replaces_what_acxfs_did_not_make(
    kind: str, shared: Path, dirfd: int, renames: str,
) -> None:
    SWAPS[kind](shared / "demo")
    with pytest.raises(UnsafePathError, match="not the link acxfs made"):
        safe_links.replace_symlink_at(dirfd, "demo", NEW, OLD)
    assert_user_entry(kind, shared / "demo")
    assert os.listdir(shared) == ["demo"]


@pytest.mark.parametrize("kind", sorted(SWAPS))
def test_replace_symlink_at_puts_back_an_entry_swapped_in_between_check_and_exchange(
    kind: str, shared: Path, dirfd: int, renames: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = swapped_at_step(monkeypatch, "replace_symlink_at:exchange", kind, shared / "demo")
    with pytest.raises(UnsafePathError, match="not the link acxfs made"):
        safe_links.replace_symlink_at(dirfd, "demo", NEW, OLD)
    assert "replace_symlink_at:exchange" in seen
    assert_user_entry(kind, shared / "demo")
    assert os.listdir(shared) == ["demo"]


def test_replace_symlink_at_re_points_the_link_it_made(
    shared: Path, dirfd: int, renames: str,
) -> None:
    safe_links.symlink_new_at(dirfd, LONG, OLD)
    safe_links.replace_symlink_at(dirfd, LONG, NEW, OLD)
    assert os.readlink(shared / LONG) == NEW
    assert os.listdir(shared) == [LONG]
    with pytest.raises(UnsafePathError):  # the old target is not there any more
        safe_links.replace_symlink_at(dirfd, LONG, OLD, OLD)
    assert os.readlink(shared / LONG) == NEW


def test_replace_symlink_at_refuses_a_missing_link(dirfd: int, shared: Path) -> None:
    with pytest.raises(UnsafePathError):
        safe_links.replace_symlink_at(dirfd, "demo", NEW, OLD)
    assert os.listdir(shared) == []


@pytest.mark.parametrize("kind", sorted(SWAPS))
def test_remove_symlink_at_removes_only_the_link_it_made(
    kind: str, shared: Path, dirfd: int, renames: str,
) -> None:
    SWAPS[kind](shared / "demo")
    with pytest.raises(UnsafePathError, match="not the link acxfs made"):
        safe_links.remove_symlink_at(dirfd, "demo", OLD)
    assert_user_entry(kind, shared / "demo")
    safe_links.symlink_new_at(dirfd, LONG, OLD)
    safe_links.remove_symlink_at(dirfd, LONG, OLD)
    assert os.listdir(shared) == ["demo"]


@pytest.mark.parametrize("kind", sorted(SWAPS))
def test_remove_symlink_at_puts_back_an_entry_swapped_in_after_the_check(
    kind: str, shared: Path, dirfd: int, renames: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = swapped_at_step(monkeypatch, "remove_symlink_at:move", kind, shared / "demo")
    with pytest.raises(UnsafePathError, match="not the link acxfs made"):
        safe_links.remove_symlink_at(dirfd, "demo", OLD)
    assert "remove_symlink_at:move" in seen
    assert_user_entry(kind, shared / "demo")
    assert os.listdir(shared) == ["demo"]


# --- names, modes, fallbacks --------------------------------------------------------------


def test_a_255_byte_name_works_for_every_writer(shared: Path, dirfd: int, renames: str) -> None:
    for index, writer in enumerate(sorted(WRITERS)):
        name = str(index) + LONG[1:]
        WRITERS[writer](dirfd, name)
        assert (shared / name).read_bytes() == b"new bytes"
    with safe_files.open_new_dir_at(dirfd, LONG, 0o755) as staging:
        safe_files.write_new_at(staging.fd, LONG, b"inside", 0o644)
        staging.commit()
    assert (shared / LONG / LONG).read_bytes() == b"inside"
    deeper = "d" + LONG[1:]
    with safe_dirs.make_dirs_at(dirfd, f"{LONG}/{deeper}") as made:
        assert made.made == [f"{shared}/{LONG}/{deeper}"]
    assert temp_entries(shared) == []


@pytest.mark.parametrize("umask", [0o077, 0o022, 0o000])
@pytest.mark.parametrize("mode", [0o600, 0o644, 0o755, 0o444])
def test_modes_are_set_exactly_with_fchmod(
    mode: int, umask: int, shared: Path, dirfd: int, monkeypatch: pytest.MonkeyPatch,
) -> None:
    temp_modes: list[int] = []

    def look() -> None:
        (temp,) = temp_entries(shared)
        temp_modes.append(stat.S_IMODE(os.lstat(shared / temp).st_mode))

    at_step(monkeypatch, "commit:rename", look)
    old = os.umask(umask)
    try:
        safe_files.write_new_at(dirfd, "new", b"x", mode)
        safe_files.replace_file_at(dirfd, "state", b"x", mode)
        with safe_files.open_new_dir_at(dirfd, "tree", mode | 0o700) as staging:
            staging.commit()
    finally:
        os.umask(old)
    assert temp_modes == [mode]  # set before any byte is written; 0600 never wider
    assert stat.S_IMODE(os.stat(shared / "new").st_mode) == mode
    assert stat.S_IMODE(os.stat(shared / "state").st_mode) == mode
    assert stat.S_IMODE(os.stat(shared / "tree").st_mode) == mode | 0o700


def test_a_new_file_is_never_wider_than_0600_before_its_fchmod(
    shared: Path, dirfd: int, monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_fchmod = os.fchmod
    before: list[int] = []

    def fchmod(fd: int, mode: int) -> None:
        before.append(stat.S_IMODE(os.fstat(fd).st_mode))
        real_fchmod(fd, mode)

    monkeypatch.setattr(os, "fchmod", fchmod)
    old = os.umask(0)
    try:
        safe_files.write_new_at(dirfd, "key.pem", b"PRIVATE", 0o600)
    finally:
        os.umask(old)
    assert before == [0o600]


def test_without_renameat2_new_files_still_never_replace(
    shared: Path, dirfd: int, monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []

    def unsupported(old_dirfd: int, old: str, new_dirfd: int, new: str, flags: int) -> None:
        calls.append(flags)
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS), new)

    monkeypatch.setattr(safe_ops, "_renameat2", unsupported)
    safe_files.write_new_at(dirfd, "out", b"first", 0o644)
    with pytest.raises(FileExistsError):
        safe_files.write_new_at(dirfd, "out", b"second", 0o644)
    (shared / "dir").mkdir()
    (shared / "dir" / "kept").write_bytes(b"kept")
    with pytest.raises(FileExistsError):
        safe_files.write_new_at(dirfd, "dir", b"second", 0o644)
    (shared / "src").write_bytes(b"moved")
    safe_dirs.rename_noreplace_at(dirfd, "src", dirfd, "moved")
    with pytest.raises(FileExistsError), safe_files.open_new_dir_at(dirfd, "dir") as staging:
        staging.commit()
    assert calls and set(calls) == {safe_dirs.RENAME_NOREPLACE}
    assert (shared / "out").read_bytes() == b"first"
    assert (shared / "moved").read_bytes() == b"moved"
    assert os.listdir(shared / "dir") == ["kept"]
    assert sorted(os.listdir(shared)) == ["dir", "moved", "out"]


def test_copy_fd_at_is_checked_before_it_is_in_place(shared: Path, dirfd: int) -> None:
    source = shared / "bundle.acx"
    data = os.urandom(3 * 1024 * 1024 + 17)
    source.write_bytes(data)
    chunks: list[bytes] = []
    src_fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        temp = safe_files.copy_fd_at(dirfd, "sha256-abc", src_fd, 0o444, on_chunk=chunks.append)
    finally:
        os.close(src_fd)
    assert b"".join(chunks) == data
    assert not os.path.lexists(shared / "sha256-abc")  # nothing served before the check
    assert os.pread(temp.fd, len(data) + 1, 0) == data  # the copy itself is what is checked
    assert Path(temp.proc_path).read_bytes() == data
    temp.commit()
    assert (shared / "sha256-abc").read_bytes() == data
    assert stat.S_IMODE(os.stat(shared / "sha256-abc").st_mode) == 0o444
    src_fd = os.open(source, os.O_RDONLY)
    try:
        with safe_files.copy_fd_at(dirfd, "sha256-def", src_fd, 0o444):
            pass  # a failed check: discarded
    finally:
        os.close(src_fd)
    assert sorted(os.listdir(shared)) == ["bundle.acx", "sha256-abc"]


# --- directories --------------------------------------------------------------------------


def test_make_dirs_returns_what_it_made_and_takes_back_only_that(
    shared: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    (shared / "a").mkdir()

    def other_process() -> None:
        (shared / "a" / "b").mkdir()

    at_step(monkeypatch, "make_dirs_at:mkdir", other_process)
    with safe_dirs.make_dirs(shared / "a" / "b" / "c" / "d") as made:
        assert made.made == [f"{shared}/a/b/c", f"{shared}/a/b/c/d"]
        safe_files.write_new_at(made.fd, "file", b"x", 0o644)
        made.remove_made()  # "d" is not empty: nothing removed
        assert (shared / "a/b/c/d/file").exists()
        os.unlink(shared / "a/b/c/d/file")
        made.remove_made()
    assert os.listdir(shared / "a") == ["b"]  # b was the other process's
    assert os.listdir(shared / "a" / "b") == []


def test_make_dirs_at_takes_back_nothing_swapped_in_for_what_it_made(
    shared: Path, dirfd: int,
) -> None:
    with safe_dirs.make_dirs_at(dirfd, "x/y") as made:
        os.rename(shared / "x" / "y", shared / "y-moved")
        os.mkdir(shared / "x" / "y")
        made.remove_made()
    assert os.path.isdir(shared / "x" / "y") and os.path.isdir(shared / "y-moved")


@root_only
def test_a_dotfiles_agent_directory_link_is_followed_only_when_asked_and_owned(
    shared: Path, tmp_path: Path,
) -> None:
    dotfiles = tmp_path / "dotfiles" / "claude-skills"
    dotfiles.mkdir(parents=True)
    os.symlink(dotfiles, shared / "skills")
    with pytest.raises(UnsafePathError):
        os.close(safe_dirs.open_dir(shared / "skills"))
    fd = safe_dirs.open_dir(shared / "skills", allow_user_symlink=True)
    try:
        safe_links.symlink_new_at(fd, "demo", NEW)
    finally:
        os.close(fd)
    assert os.readlink(dotfiles / "demo") == NEW
    with pytest.raises(UnsafePathError):  # only the last component may be that link
        os.close(safe_dirs.open_dir(shared / "skills" / "demo", allow_user_symlink=True))

    theirs = shared / "theirs"
    as_nobody(lambda: theirs.mkdir())
    os.symlink(theirs, shared / "to-theirs")
    with pytest.raises(UnsafePathError, match="another user owns"):
        os.close(safe_dirs.open_dir(shared / "to-theirs", allow_user_symlink=True))

    os.symlink(shared / "skills", shared / "via-link")  # a second link on the way
    with pytest.raises(UnsafePathError, match="symbolic link"):
        os.close(safe_dirs.open_dir(shared / "via-link", allow_user_symlink=True))

    os.symlink(dotfiles, shared / "nobodys")
    os.lchown(shared / "nobodys", NOBODY, NOBODY)
    with pytest.raises(UnsafePathError, match="owned by another user"):
        os.close(safe_dirs.open_dir(shared / "nobodys", allow_user_symlink=True))


def test_names_that_are_not_one_component_are_refused(dirfd: int) -> None:
    for name in ("", ".", "..", "a/b", "../x"):
        with pytest.raises(ValueError):
            safe_files.write_new_at(dirfd, name, b"x", 0o644)
        with pytest.raises(ValueError):
            safe_links.symlink_new_at(dirfd, name, "t")
