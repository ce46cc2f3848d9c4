"""Every user path acxfs reads or writes, named once: the home, the XDG base directories, the
trust store, the state directory and its mount records, the library and its parts.

Invariant: every path returned here is absolute.  A relative `HOME` is refused (a link
target or a file made from it would move with the working directory); a relative `XDG_*`
value is ignored, as the XDG base directory specification says, and so is a relative
`ACXFS_TRUST_DIR`'s dependence on the working directory (it is made absolute once, here).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from acxfs.errors import EnvironmentProblem


def home() -> Path:
    """The user's home directory: `$HOME` (absolute), else the password database's."""
    value = os.path.expanduser("~")
    if not os.path.isabs(value):
        raise EnvironmentProblem(f"HOME is a relative path ({value!r}); acxfs needs an absolute "
                                 "HOME (export HOME=/home/NAME)")
    return Path(value)


def xdg_dir(variable: str, *default: str) -> Path:
    """`$variable`, or ~/`default` when it is unset or relative (the XDG base directory rules:
    a relative value is invalid, and would move with the working directory)."""
    base = os.environ.get(variable, "")
    if not os.path.isabs(base):
        return home().joinpath(*default)
    return Path(base)


def trust_dir() -> Path:
    """The user's trust store: $ACXFS_TRUST_DIR (made absolute), else
    ${XDG_CONFIG_HOME:-~/.config}/acxfs."""
    explicit = os.environ.get("ACXFS_TRUST_DIR")
    if explicit:
        return Path(os.path.abspath(explicit))
    return xdg_dir("XDG_CONFIG_HOME", ".config") / "acxfs"


def state_dir() -> Path:
    """acxfs's state: `${XDG_STATE_HOME:-~/.local/state}/acxfs` (mount records, the log)."""
    return xdg_dir("XDG_STATE_HOME", ".local", "state") / "acxfs"


def mount_records_dir() -> Path:
    """One record per live mount made by `acxfs mount`, named by its mountpoint's hash."""
    return state_dir() / "mounts"


def default_log_file() -> Path:
    return state_dir() / "acxfs.log"


def systemd_user_dir() -> Path:
    """Where systemd looks for a user's own units."""
    return xdg_dir("XDG_CONFIG_HOME", ".config") / "systemd" / "user"


@dataclass(frozen=True)
class LibraryPaths:
    """The skills library under `root` (default `$XDG_DATA_HOME/acxfs`): every path of the
    library is derived here from one root, so no two modules can disagree on where the bundle
    store, the state, the lock, the mountpoint or the control socket are."""

    root: Path

    @property
    def store(self) -> Path:
        """The bundle store: installed files, each named by the sha256 of its bytes."""
        return self.root / "store"

    @property
    def state(self) -> Path:
        return self.root / "library.json"

    @property
    def intent(self) -> Path:
        """The change under way, written before its first step and removed after its last."""
        return self.root / "intent.json"

    @property
    def lock(self) -> Path:
        return self.root / "lock"

    @property
    def mnt(self) -> Path:
        """The daemon's mountpoint: every served bundle's skills under an immutable path."""
        return self.root / "mnt"

    @property
    def control_dir(self) -> Path:
        """Mode 0700: only the owner reaches the socket inside it."""
        return self.root / "control"

    @property
    def socket(self) -> Path:
        return self.control_dir / "daemon.sock"

    @property
    def log(self) -> Path:
        return self.root / "daemon.log"

    @property
    def checks(self) -> Path:
        """What the last checks of the sources found (`acxfs refresh`, the daemon's timer)."""
        return self.root / "checks.json"

    @property
    def http_cache(self) -> Path:
        """The bodies sources sent last time, for conditional requests."""
        return self.root / "http-cache"


def library_paths() -> LibraryPaths:
    """`$XDG_DATA_HOME/acxfs` (default `~/.local/share/acxfs`)."""
    return LibraryPaths(xdg_dir("XDG_DATA_HOME", ".local", "share") / "acxfs")
