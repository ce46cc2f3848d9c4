"""The three ways to install N bundles, each a column of the table: the skills library (one
daemon), one `acxfs mount` per bundle, and plain copies (`acxfs extract`, the floor).

Each column lives in its own isolated home under its root, and `stop` leaves nothing of it
running or mounted.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from scripts.bench.system import fusermount_u, tool
from scripts.bench_library.config import BenchError, Bundle
from scripts.bench_library.system import isolated_env, run, stop_daemons, timed, wait_until
from scripts.liveness import is_mounted, mounts_under


class Column:
    """One way of installing N bundles, in its own isolated home under `root`."""

    name = ""
    slug = ""  # short: the library's control socket path must stay under 108 bytes
    has_daemon = True

    def __init__(self, root: Path, trust: Path, timeout: float) -> None:
        self.root = root
        self.env = isolated_env(root, trust)
        self.home = Path(self.env["HOME"])
        self.timeout = timeout
        self.bundles: list[Bundle] = []

    def acxfs(self, *args: str) -> str:
        return run([tool("acxfs"), *args], self.env, self.timeout)

    def skill_md(self, bundle: Bundle) -> Path:
        return self.home / ".claude" / "skills" / bundle.skill / "SKILL.md"

    def install(self, bundles: list[Bundle]) -> float | None:
        """Install every bundle (timed when it is a separate step); the daemons end down."""
        self.bundles = bundles
        return None

    def up(self) -> None:
        """Start serving every installed bundle; returns once every skill is visible."""

    def add(self, bundle: Bundle) -> None:
        """Install one more bundle, until it is visible."""
        raise NotImplementedError

    def undo_add(self, bundle: Bundle) -> None:
        raise NotImplementedError

    def down(self) -> None:
        stop_daemons(self.root, self.timeout)

    def stop(self) -> None:
        """On any exit: nothing of this column left running or mounted."""
        stop_daemons(self.root)

    def resolves(self, bundle: Bundle) -> bool:
        return self.skill_md(bundle).parent.is_dir()


class LibraryColumn(Column):
    name = "library"
    slug = "lib"

    def links(self, bundle: Bundle) -> list[Path]:
        return [self.home / d / "skills" / bundle.skill for d in (".agents", ".claude")]

    def resolves(self, bundle: Bundle) -> bool:
        return all(link.is_symlink() and link.is_dir() for link in self.links(bundle))

    def install(self, bundles: list[Bundle]) -> float | None:
        self.bundles = bundles
        self.acxfs("up")  # `add` starts the daemon itself; starting it first times only the add
        took = timed(lambda: self.acxfs("add", *(str(b.path) for b in bundles)))
        self.down()
        return took

    def up(self) -> None:
        self.acxfs("up")
        wait_until(lambda: all(self.resolves(b) for b in self.bundles), self.timeout,
                   "links not resolving")

    def add(self, bundle: Bundle) -> None:
        self.acxfs("add", str(bundle.path))
        if not self.resolves(bundle):
            raise BenchError(f"acxfs add returned before {bundle.skill} was linked")

    def undo_add(self, bundle: Bundle) -> None:
        self.acxfs("remove", bundle.skill)

    def down(self) -> None:
        self.acxfs("down")
        super().down()

    def stop(self) -> None:
        with contextlib.suppress(BenchError):
            self.acxfs("down")
        super().stop()


class MountsColumn(Column):
    name = "per-bundle mounts"
    slug = "mnt"

    def mountpoint(self, bundle: Bundle) -> Path:
        return self.skill_md(bundle).parent

    def mount(self, bundle: Bundle) -> None:
        self.mountpoint(bundle).mkdir(parents=True, exist_ok=True)
        self.acxfs("mount", str(bundle.path), str(self.mountpoint(bundle)))

    def resolves(self, bundle: Bundle) -> bool:
        return is_mounted(self.mountpoint(bundle))

    def up(self) -> None:
        for bundle in self.bundles:
            self.mount(bundle)
        wait_until(lambda: all(self.resolves(b) and os.listdir(self.mountpoint(b))
                               for b in self.bundles), self.timeout, "mounts not up")

    def add(self, bundle: Bundle) -> None:
        self.mount(bundle)
        wait_until(lambda: self.resolves(bundle), self.timeout, "mount not up")

    def undo_add(self, bundle: Bundle) -> None:
        fusermount_u(self.mountpoint(bundle))

    def down(self) -> None:
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(fusermount_u, mounts_under(self.home)))
        super().down()


class CopiesColumn(Column):
    name = "plain copies"
    slug = "cp"
    has_daemon = False

    def skill_md(self, bundle: Bundle) -> Path:
        return self.home / ".agents" / "skills" / bundle.skill / "SKILL.md"

    def install(self, bundles: list[Bundle]) -> float | None:
        self.bundles = bundles
        start = time.perf_counter()
        for bundle in bundles:
            self.add(bundle)
        return time.perf_counter() - start

    def add(self, bundle: Bundle) -> None:
        self.skill_md(bundle).parent.parent.mkdir(parents=True, exist_ok=True)
        self.acxfs("extract", "--skill", bundle.skill, str(bundle.path),
                   str(self.skill_md(bundle).parent))

    def undo_add(self, bundle: Bundle) -> None:
        shutil.rmtree(self.skill_md(bundle).parent)


COLUMN_TYPES: tuple[type[Column], ...] = (LibraryColumn, MountsColumn, CopiesColumn)
