"""What `acxfs mount` leaves behind while a mount lives: its record and its log lines.

Invariant: a record is written through a descriptor of the records directory, reached with
no link on the way and every directory on it the user's alone (`acxfs.safe.ownership`),
under a fresh temporary name renamed into place (never through a link, never over a file
acxfs did not make); the log is appended to only when it is a regular file, and never
followed through a link.  Reading a record never trusts it: a record that is not a regular
file, is too large or has a field of the wrong type is no record.  Whether a record's daemon
still lives is `alive` (its pid exists and is no zombie).
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

from acxfs.errors import DamagedState
from acxfs.mount.table import canonical
from acxfs.paths import mount_records_dir
from acxfs.safe import files as safe_files
from acxfs.safe import own_files, ownership
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
    """Replace the record of `state.mountpoint` whole, relative to the records directory
    (reached with no link on the way, every directory on it the user's alone)."""
    path = _state_path(state.mountpoint)
    data = json.dumps(asdict(state), indent=2).encode("utf-8")
    with ownership.make_dirs(path.parent, 0o755) as made:
        safe_files.replace_file_at(made.fd, path.name, data, 0o644)


MAX_RECORD_BYTES = 1024 * 1024
RECORD = own_files.Table(MountState, {
    "mountpoint": own_files.Field(own_files.text()),
    "container": own_files.Field(own_files.text()),
    "view": own_files.Field(own_files.text()),
    "verdict": own_files.Field(own_files.text()),
    "pid": own_files.Field(own_files.integer),
    "created_mountpoint": own_files.Field(own_files.boolean),
    "log_file": own_files.Field(own_files.optional(own_files.text())),
    "created_parents": own_files.Field(own_files.list_of(own_files.text()), default=[]),
})


def read_state(mountpoint: str) -> MountState | None:
    """The record of `mountpoint`, or None (none, or not one acxfs wrote).  The records
    directory must be the user's alone (`ForeignDirectory` otherwise): a record says which
    directories acxfs may remove."""
    path = _state_path(mountpoint)
    ownership.check_path(path.parent)
    try:
        return own_files.read_record(path, RECORD, max_bytes=MAX_RECORD_BYTES, max_depth=4)
    except (OSError, DamagedState):
        return None


def clear_state(mountpoint: str) -> None:
    with contextlib.suppress(OSError):
        _state_path(mountpoint).unlink()


def alive(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return False
