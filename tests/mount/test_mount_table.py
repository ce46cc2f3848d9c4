"""The kernel's mount table as acxfs reads it (`acxfs.mount.table`), from bytes: the octal
escapes /proc/mounts writes for space, tab, newline and backslash (``\\040 \\011 \\012
\\134``) undone, every other byte kept as it is, rows split on the kernel's single spaces and
newlines only, and the acxfs mounts, their owners and a mountpoint's canonical form found in it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from acxfs.mount import table

ROOT = b"/dev/sda1 / ext4 rw,relatime 0 0"
ACXFS = b"acxfs:/home/u/a.acx /home/u/mnt fuse.acxfs ro,nosuid,nodev,user_id=1000,group_id=1000 0 0"


@pytest.mark.parametrize(("written", "meant"), [
    (b"/mnt/with\\040space", "/mnt/with space"),
    (b"/mnt/with\\011tab", "/mnt/with\ttab"),
    (b"/mnt/with\\012newline", "/mnt/with\nnewline"),
    (b"/mnt/back\\134slash", "/mnt/back\\slash"),
    (b"/mnt/\\134040", "/mnt/\\040"),  # an escaped backslash before digits is one backslash
    (b"/mnt/all\\040\\011\\012\\134", "/mnt/all \t\n\\"),
    (b"/mnt/plain", "/mnt/plain"),
])
def test_the_kernels_octal_escapes_are_undone(written: bytes, meant: str) -> None:
    (row,) = table.parse_mounts(b"src " + written + b" fuse.acxfs ro 0 0\n")
    assert row == ("src", meant, "fuse.acxfs", "ro")


@pytest.mark.parametrize(("written", "meant"), [
    (b"/mnt/a\\089", "/mnt/a\\089"),  # 8 and 9 are no octal digits
    (b"/mnt/a\\08b", "/mnt/a\\08b"),
    (b"/mnt/a\\9", "/mnt/a\\9"),
    (b"/mnt/end\\04", "/mnt/end\\04"),  # too short
    (b"/mnt/end\\", "/mnt/end\\"),
    (b"/mnt/x\\abc", "/mnt/x\\abc"),
])
def test_a_backslash_without_three_octal_digits_is_kept(written: bytes, meant: str) -> None:
    assert table.parse_mounts(b"s " + written + b" t o 0 0")[0][1] == meant


@pytest.mark.parametrize("name", [
    "/mnt/non\u00a0breaking", "/mnt/line\u2028separator", "/mnt/cr\rvt\x0b", "/mnt/\u4e2d\u6587",
])
def test_every_byte_the_kernel_does_not_escape_is_part_of_the_name(name: str) -> None:
    data = b"acxfs:/c.acx " + os.fsencode(name) + b" fuse.acxfs ro 0 0\n"
    assert table.parse_mounts(data) == [("acxfs:/c.acx", name, "fuse.acxfs", "ro")]


def test_bytes_that_are_not_utf8_come_back_as_the_same_bytes() -> None:
    raw = b"/mnt/\xff\xfe-latin1-\xe9"
    ((_, point, _, _),) = table.parse_mounts(b"s " + raw + b" fuse.acxfs ro 0 0")
    assert os.fsencode(point) == raw


def test_rows_split_on_newlines_and_single_spaces_only() -> None:
    data = ROOT + b"\n" + ACXFS + b"\n\nshort row\n"
    assert table.parse_mounts(data) == [
        ("/dev/sda1", "/", "ext4", "rw,relatime"),
        ("acxfs:/home/u/a.acx", "/home/u/mnt", "fuse.acxfs",
         "ro,nosuid,nodev,user_id=1000,group_id=1000"),
    ]
    # two spaces make an empty field: the row is read as the kernel would never write it
    assert table.parse_mounts(b"a  /x t o 0 0") == [("a", "", "/x", "t")]


def test_the_acxfs_mounts_and_their_owner_come_from_the_table(
        monkeypatch: pytest.MonkeyPatch) -> None:
    other = b"acxfs:/x.acx /home/v/mnt fuse.other rw,user_id=7 0 0"
    spaced = b"acxfs:/b.acx /srv/my\\040skills fuse.acxfs ro,user_id=0 0 0"
    rows = table.parse_mounts(b"\n".join([ROOT, ACXFS, other, spaced]))
    monkeypatch.setattr(table, "proc_mounts", lambda: rows)
    assert table.live_mounts() == [("acxfs:/home/u/a.acx", "/home/u/mnt"),
                                   ("acxfs:/b.acx", "/srv/my skills")]
    assert table.mount_owner("/home/u/mnt") == 1000
    assert table.mount_owner("/srv/my skills") == 0
    assert table.mount_owner("/home/v/mnt") is None  # not an acxfs mount
    assert table.mount_owner("/nowhere") is None
    assert table.is_mounted("/home/v/mnt") and table.is_mounted("/srv/my skills")
    assert not table.is_mounted("/srv/my")


def test_a_user_id_option_that_is_not_a_number_is_no_owner(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rows = table.parse_mounts(b"acxfs:/a /m fuse.acxfs ro,user_id=1x,user_id= 0 0")
    monkeypatch.setattr(table, "proc_mounts", lambda: rows)
    assert table.mount_owner("/m") is None


def test_a_mountpoint_is_compared_with_its_parents_resolved_but_never_itself(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real)
    (real / "point").symlink_to("/elsewhere")  # the last component is a link: kept as named
    assert table.canonical(str(tmp_path / "alias" / "point")) == str(real / "point")
    monkeypatch.chdir(real)
    assert table.canonical("point") == str(real / "point")
    assert table.canonical(str(tmp_path / "alias" / "x" / ".." / "point")) == str(real / "point")


def test_the_live_table_holds_the_root_mount() -> None:
    assert any(point == "/" for _, point, _, _ in table.proc_mounts())
