"""What `acxfs mount` leaves behind while a mount lives: its record and its log lines.

Invariant: a record is written through a descriptor of the records directory, under a fresh
temporary name renamed into place (never through a link, never over a file acxfs did not
make); the log is appended to only when it is a regular file, and never followed through a
link.  Reading a record never trusts it: a damaged one is no record.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path

from acxfs.mount.table import canonical
from acxfs.paths import mount_records_dir
from acxfs.safe import dirs as safe_dirs
from acxfs.safe import files as safe_files
from acxfs.text import printable


def log_line(log_file: Path | None, message: str) -> None:
    """Append one timestamped line; logging never stops the filesystem."""
    if log_file is None:
        return
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    with contextlib.suppress(OSError):
        log_file.parent.mkdir(parents=True, exist_ok=True)
        # Never blocks (a FIFO without a reader), never follows a link, and appends only to a
        # regular file.
        fd = os.open(log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK
                     | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                os.write(fd, f"{stamp} [{os.getpid()}] {printable(message)}\n".encode("utf-8",
                                                                              "backslashreplace"))
        finally:
            os.close(fd)


@dataclass
class MountState:
    mountpoint: str
    container: str
    view: str
    verdict: str
    pid: int
    created_mountpoint: bool
    log_file: str | None
    created_parents: list[str] = field(default_factory=list)  # made for the mountpoint


def _state_path(mountpoint: str) -> Path:
    # Never resolve a path inside a live mount from its own daemon: that would deadlock.
    key = hashlib.sha256(os.fsencode(canonical(mountpoint))).hexdigest()[:24]
    return mount_records_dir() / f"{key}.json"


def write_state(state: MountState) -> None:
    """Replace the record of `state.mountpoint` whole, relative to the records directory."""
    path = _state_path(state.mountpoint)
    data = json.dumps(asdict(state), indent=2).encode("utf-8")
    with safe_dirs.make_dirs(path.parent, 0o755) as made:
        safe_files.replace_file_at(made.fd, path.name, data, 0o644)


def read_state(mountpoint: str) -> MountState | None:
    try:
        doc = json.loads(_state_path(mountpoint).read_text(encoding="utf-8"))
        return MountState(**doc)
    except (OSError, ValueError, TypeError):
        return None


def clear_state(mountpoint: str) -> None:
    with contextlib.suppress(OSError):
        _state_path(mountpoint).unlink()


