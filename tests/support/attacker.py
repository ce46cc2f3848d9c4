"""Another user on the machine: `nobody`, acting in a directory root shares with it.

Invariant: a move made through `as_nobody` is made by a child process that has dropped every
group and both ids to `nobody` before it runs, so it can do only what another user really can;
the parent waits for it and fails the test unless the move succeeded. `shared_directory` is
world-writable without the sticky bit, in /tmp (reachable by `nobody`, unlike pytest's 0700
`tmp_path`), and is removed afterwards; `make_secret` is the root-owned 0700 directory holding
a 0600 file that an attacker's link aims at, and `assert_secret_untouched` checks it still
holds exactly that file with its bytes, mode and owner.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

NOBODY = 65534
SECRET = b"root's own bytes\n"


def drop_to_nobody() -> None:
    """Become `nobody` (uid, gid, no supplementary groups) in this process, for good."""
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def as_nobody(action: Callable[[], None]) -> None:
    """Run `action` in a child process as uid/gid nobody; it must succeed."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            drop_to_nobody()
            action()
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the attacker's move failed"


@contextlib.contextmanager
def shared_directory() -> Iterator[Path]:
    """A world-writable directory without the sticky bit, reachable by nobody."""
    path = Path(tempfile.mkdtemp(prefix="acxfs-shared-", dir="/tmp"))
    os.chmod(path, 0o777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def make_secret(parent: Path) -> Path:
    """`parent/secret`: a root-owned 0700 directory with a 0600 file `victim` holding SECRET."""
    directory = parent / "secret"
    directory.mkdir(mode=0o700)
    (directory / "victim").write_bytes(SECRET)
    os.chmod(directory / "victim", 0o600)
    return directory


def assert_secret_untouched(secret: Path) -> None:
    """`secret` holds only `victim`, with SECRET as its bytes, mode 0600 and owner root."""
    assert sorted(os.listdir(secret)) == ["victim"]
    victim = secret / "victim"
    assert victim.read_bytes() == SECRET
    st = os.stat(victim)
    assert (stat.S_IMODE(st.st_mode), st.st_uid) == (0o600, 0)
