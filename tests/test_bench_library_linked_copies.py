"""The library benchmark's copies behind links are the library without its daemon: every link
the library makes is there under the column's HOME, named alike and pointing to the same path
relative to HOME, and that path is a plain directory (no mount) holding the skill's own bytes;
the private library the layout was read from is gone, its daemon stopped."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from scripts.bench_library.bundles import build_bundles
from scripts.bench_library.columns import LibraryColumn, LinkedCopiesColumn
from scripts.bench_library.system import daemons, isolated_env, remove_tree, stop_daemons
from scripts.liveness import mounts_under


@pytest.mark.fuse
@pytest.mark.slow
def test_copies_behind_links_sit_where_the_library_links_point() -> None:
    # A short base: the library's control socket path must fit in 108 bytes.
    with tempfile.TemporaryDirectory(prefix="blc") as work:
        base = Path(work)
        trust = base / "trust"
        try:
            bundles = build_bundles(base / "build", isolated_env(base / "build", trust), 3, 60)
            library = LibraryColumn(base / "lib", trust, 60)
            library.install(bundles)
            linked = LinkedCopiesColumn(base / "ln", trust, 60)
            linked.install(bundles)
            assert not daemons(linked.root)
            assert not (linked.root / "l").exists()
            made = sorted(p.relative_to(linked.home) for p in linked.home.rglob("*")
                          if p.is_symlink())
            links = sorted(link.relative_to(library.home) for b in bundles
                           for link in library.links(b))
            assert made == links
            for bundle in bundles:
                for link in library.links(bundle):
                    copy = linked.home / link.relative_to(library.home)
                    target = Path(os.readlink(copy))
                    assert (target.relative_to(linked.home)
                            == Path(os.readlink(link)).relative_to(library.home))
                    assert target.is_dir() and not target.is_symlink()
                    assert (target / "SKILL.md").read_bytes() == bundle.skill_md
            assert not mounts_under(linked.root)
        finally:
            stop_daemons(base)
            remove_tree(base)
