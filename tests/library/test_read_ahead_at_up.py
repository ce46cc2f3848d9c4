"""`acxfs up` asks the kernel for every store file before it checks the first one, so that a
start after boot (nothing in the page cache) waits for the disk once, not once per bundle.

Through the real `acxfs up`; the opens of the store's files are seen with inotify (IN_OPEN
and IN_CLOSE_NOWRITE, in order): each bundle's file is opened and closed once, every one of
them, before any of them is opened a second time (by its check).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import struct
from pathlib import Path

import pytest

from scripts.mounting import acxfs
from tests.support.library import data_dir, listing, ok, pack

pytestmark = [pytest.mark.fuse, pytest.mark.slow, pytest.mark.usefixtures("library_stops",
                                                                          "local_key")]

IN_OPEN, IN_CLOSE_NOWRITE = 0x20, 0x10
IN_NONBLOCK, IN_CLOEXEC = 0o4000, 0o2000000
EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then the name
BUNDLES = 4


def opened_in_order(fd: int) -> list[str]:
    """The names of the files opened, in order, from the events queued on `fd`."""
    found: list[str] = []
    while select.select([fd], [], [], 0.5)[0]:
        data = os.read(fd, 1 << 16)
        offset = 0
        while offset < len(data):
            _, mask, _, size = EVENT.unpack_from(data, offset)
            name = data[offset + EVENT.size:offset + EVENT.size + size].rstrip(b"\0").decode()
            if mask & IN_OPEN and name:
                found.append(name)
            offset += EVENT.size + size
    return found


def test_up_asks_for_every_store_file_before_it_checks_the_first(tmp_path: Path) -> None:
    for index in range(BUNDLES):
        skill = f"ahead-{index}"
        (tmp_path / "src" / skill).mkdir(parents=True)
        (tmp_path / "src" / skill / "SKILL.md").write_text(
            f"---\nname: {skill}\ndescription: Read ahead, number {index}.\n---\n\n# {skill}\n")
        ok(acxfs("add", pack(tmp_path / "src" / skill, tmp_path / f"{skill}.acx")))
    ok(acxfs("down"))
    store = data_dir() / "store"
    files = sorted(p.name for p in store.iterdir())
    assert len(files) == BUNDLES
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    fd = int(libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC))
    assert fd >= 0, os.strerror(ctypes.get_errno())
    try:
        assert libc.inotify_add_watch(fd, os.fsencode(store), IN_OPEN | IN_CLOSE_NOWRITE) >= 0
        ok(acxfs("up"))
        opened = opened_in_order(fd)
    finally:
        os.close(fd)
    assert all(b["served"] for b in listing()["bundles"])
    assert sorted(opened[:BUNDLES]) == files, opened  # each once, before any check
    assert set(opened[BUNDLES:]) == set(files)  # then each by its check
