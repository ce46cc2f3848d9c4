"""A first read through the library after the page cache dropped: it reads no page of the
bundle's store file from disk (`up` read the row index a small bundle's files live in), and
still inflates and checks the file only then, as it is read.

Through the real `acxfs` command and a real FUSE mount. The store file's pages are evicted
with `posix_fadvise(DONTNEED)` (no root needed), and what the daemon read from disk is its
own `/proc/PID/io` `read_bytes`; the test first proves on a copy of that file that an evicted
page read again does show there, so it cannot pass on a file system where eviction or that
count does nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.mounting import acxfs
from tests.support.library import agent_dirs, data_dir, listing, ok, pack

pytestmark = [pytest.mark.fuse, pytest.mark.slow, pytest.mark.usefixtures("library_stops",
                                                                          "local_key")]

SKILL = "cold-reader"
TEXT = (f"---\nname: {SKILL}\ndescription: Read cold, checked as it is read.\n---\n\n"
        f"# {SKILL}\n\n" + "Step: read the file.\n" * 40)


def evict(path: Path) -> None:
    """Drop `path`'s pages from the page cache."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def disk_bytes(pid: int | str) -> int:
    """What process `pid` has read from storage so far."""
    lines = Path(f"/proc/{pid}/io").read_text(encoding="ascii").splitlines()
    return int(dict(line.split(": ") for line in lines)["read_bytes"])


# Run by a process of its own: reads the file named by argv[1], prints what that read took
# from disk.
READ_AND_COUNT = """
import sys
def disk():
    lines = open("/proc/self/io", encoding="ascii").read().splitlines()
    return int(dict(line.split(": ") for line in lines)["read_bytes"])
before = disk()
open(sys.argv[1], "rb").read()
print(disk() - before)
"""


def stats(mnt: Path) -> dict[str, int]:
    doc = json.loads(os.getxattr(mnt, "user.acx.stats"))
    assert isinstance(doc, dict)
    return doc


def test_a_first_read_after_the_page_cache_dropped_reads_no_page_from_disk(
        tmp_path: Path) -> None:
    (tmp_path / "src" / SKILL).mkdir(parents=True)
    (tmp_path / "src" / SKILL / "SKILL.md").write_text(TEXT)
    ok(acxfs("add", pack(tmp_path / "src" / SKILL, tmp_path / "cold.acx")))
    ok(acxfs("down"))
    ok(acxfs("up"))  # a fresh daemon: its one check of the bundle is the only read so far
    doc = listing()
    (bundle,) = doc["bundles"]
    store_file = data_dir() / "store" / f"{bundle['digest']}.{bundle['format']}"
    pid = int(doc["daemon"]["pid"])
    mnt = Path(doc["daemon"]["mountpoint"])

    # The measure works here: a copy of the store file, evicted, then read by a process of
    # its own, shows in that process's read_bytes.
    probe = tmp_path / "probe.acx"
    shutil.copyfile(store_file, probe)
    evict(probe)
    shown = subprocess.run([sys.executable, "-c", READ_AND_COUNT, str(probe)],
                           capture_output=True, text=True, timeout=60, check=True)
    assert int(shown.stdout) > 0, "evicting pages or counting disk reads does not work here"

    evict(store_file)
    assert stats(mnt)["blobs_inflated"] == 0  # `up` checked the bundle, inflated no file
    read_before = disk_bytes(pid)
    assert (agent_dirs()[1] / SKILL / "SKILL.md").read_text() == TEXT
    assert disk_bytes(pid) - read_before == 0
    assert stats(mnt)["blobs_inflated"] == 1  # the file was checked as it was read
