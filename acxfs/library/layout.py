"""Where the library lives on disk, named once.

Invariant: every path of the library is derived here from one root, so no two modules can
disagree on where the store, the state, the lock, the mountpoint or the control socket are.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from acxfs.trust import xdg_dir


@dataclass(frozen=True)
class LibraryPaths:
    """The library under `root` (default `$XDG_DATA_HOME/acxfs`)."""

    root: Path

    @property
    def store(self) -> Path:
        """Installed bundle files, each named by the sha256 of its bytes, read-only."""
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


def library_paths() -> LibraryPaths:
    """`$XDG_DATA_HOME/acxfs` (default `~/.local/share/acxfs`)."""
    return LibraryPaths(xdg_dir("XDG_DATA_HOME", ".local", "share") / "acxfs")
