"""The five ways to install N bundles, each a column of the table: the skills library (one
daemon) with a link per skill, the same library with each agent directory served whole
(`acxfs layout whole`: the directory one link to a view of the mount), one `acxfs mount` per
bundle, copies behind links (plain copies at the real paths the
library's links point to, behind links named like the library's: the library without its
daemon), and plain copies (`acxfs extract`, the floor).

Each column lives in its own isolated home under its root, and `stop` leaves nothing of it
running or mounted.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from scripts.bench.system import fusermount_u, tool
from scripts.bench_library.config import (
    COPIES,
    LIBRARY,
    LIBRARY_WHOLE,
    LINKED,
    MOUNTS,
    BenchError,
    Bundle,
)
from scripts.bench_library.system import (
    isolated_env,
    remove_tree,
    run,
    stop_daemons,
    timed,
    wait_until,
)
from scripts.liveness import is_mounted, mounts_under


class Column:
    """One way of installing N bundles, in its own isolated home under `root`."""

    name = ""
    slug = ""  # short: the library's control socket path must stay under 108 bytes
    has_daemon = True
    starts_agents = True  # takes part in the agents' start-up rows
    measures_add = True  # `add` of one more bundle is one of its rows

    def __init__(self, root: Path, trust: Path, timeout: float) -> None:
        self.root = root
        self.trust = trust
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
    name = LIBRARY
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


class LibraryWholeColumn(LibraryColumn):
    """The library with every agent directory served whole: each directory is one link to a
    view of the mount, so a skill is a real directory of the mount, with no link of its own."""

    name = LIBRARY_WHOLE
    slug = "lw"
    directories = (".agents", ".claude")

    def links(self, bundle: Bundle) -> list[Path]:
        return [self.home / d / "skills" for d in self.directories]

    def resolves(self, bundle: Bundle) -> bool:
        return all(link.is_symlink() and (link / bundle.skill / "SKILL.md").is_file()
                   for link in self.links(bundle))

    def install(self, bundles: list[Bundle]) -> float | None:
        self.bundles = bundles
        self.acxfs("up")
        self.acxfs("layout", "whole")  # before any bundle: every add then shows in the view
        took = timed(lambda: self.acxfs("add", *(str(b.path) for b in bundles)))
        self.down()
        return took


class MountsColumn(Column):
    name = MOUNTS
    slug = "mnt"
    starts_agents = False

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
    name = COPIES
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


class LinkedCopiesColumn(Column):
    """Plain copies where the library serves each skill, behind the library's links: the
    library's own layout and links without FUSE. The layout is the library's, never assumed:
    the bundles are installed into a private library first, and each of its links is made
    again under this HOME, its target the same path under this HOME's mountpoint, now a plain
    directory holding an `acxfs extract` of the skill."""

    name = LINKED
    slug = "ln"
    has_daemon = False
    measures_add = False  # the place of one more bundle is the library's to say

    def install(self, bundles: list[Bundle]) -> float | None:
        self.bundles = bundles
        links, home, mountpoint = self.library_links(bundles)
        mnt = self.home / _inside(mountpoint, home)
        start = time.perf_counter()
        for skill, link, target in links:
            copy = mnt / _inside(Path(os.path.normpath(link.parent / target)), mountpoint)
            if not copy.exists():
                copy.parent.mkdir(parents=True, exist_ok=True)
                bundle = next(b for b in bundles if b.skill == skill)
                self.acxfs("extract", "--skill", skill, str(bundle.path), str(copy))
            made = self.home / _inside(link, home)
            made.parent.mkdir(parents=True, exist_ok=True)
            made.symlink_to(copy if os.path.isabs(target) else target)
        return time.perf_counter() - start

    def library_links(self, bundles: list[Bundle]) -> tuple[list[tuple[str, Path, str]], Path,
                                                             Path]:
        """Every link a private library makes for `bundles`, as (skill, link, its target),
        that library's HOME and its mountpoint; the library is stopped and removed after."""
        library = LibraryColumn(self.root / "l", self.trust, self.timeout)
        try:
            library.acxfs("up")
            library.acxfs("add", *(str(b.path) for b in bundles))
            doc = json.loads(library.acxfs("list", "--json"))
            library.down()
        finally:
            library.stop()
            remove_tree(library.root)
        mountpoint = (doc.get("daemon") or {}).get("mountpoint")
        if not mountpoint:
            raise BenchError("acxfs list --json named no mountpoint with the daemon up")
        links = []
        for entry in doc["bundles"]:
            if len(entry["skills"]) != 1 or not entry["links"]:
                raise BenchError(f"{entry['identity']}: not one skill with links")
            links += [(entry["skills"][0], Path(link["path"]), str(link["target"]))
                      for link in entry["links"]]
        if {skill for skill, _, _ in links} != {b.skill for b in bundles}:
            raise BenchError("the private library did not link every bundle")
        return links, library.home, Path(mountpoint)


def _inside(path: Path, base: Path) -> Path:
    """`path` relative to `base`, which must hold it."""
    try:
        return path.relative_to(base)
    except ValueError:
        raise BenchError(f"the library put {path} outside {base}; cannot lay copies out "
                         "like it") from None

COLUMN_TYPES: tuple[type[Column], ...] = (LibraryColumn, LibraryWholeColumn, MountsColumn,
                                          LinkedCopiesColumn, CopiesColumn)
