"""Many cartridges served by one process keep a bounded number of descriptors open.

Each served cartridge holds one descriptor (its anchor on the checked file); connections
opened beyond the anchors are at most `connection.MAX_OPEN` in the whole process, however
many sources there are and however much is read, sequentially or concurrently."""

from __future__ import annotations

import dataclasses
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from acxfs.container import Source
from acxfs.content.cache import VerifiedCache
from acxfs.formats import open_source
from acxfs.formats.acx import connection
from acxfs.limits import DEFAULT_LIMITS
from acxfs.trust.store import load_trust
from scripts import cartwriter as cw
from tests.support.demo import PUBLISHER

SOURCES = 200
DISTINCT = 10


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _skill(index: int) -> dict[str, bytes]:
    name = f"skill-{index:03d}"
    return {f"rom/skills/{name}/SKILL.md":
            f"---\nname: {name}\ndescription: Skill number {index}.\n---\n# {name}\n".encode()}


def test_two_hundred_sources_in_one_store_stay_within_the_descriptor_bound(
    tmp_path: Path, signer: cw.Signer, trusted_registry: Path
) -> None:
    built = [cw.build_cartridge(tmp_path / f"b{i:03d}.acx", _skill(i), signer=signer,
                                publisher=PUBLISHER) for i in range(DISTINCT)]
    carts = built + [tmp_path / f"copy{i:03d}.acx" for i in range(DISTINCT, SOURCES)]
    for index in range(DISTINCT, SOURCES):  # each its own file: its own source and anchor
        shutil.copyfile(built[index % DISTINCT], carts[index])
    trust = load_trust([str(trusted_registry)])
    store = VerifiedCache(dataclasses.replace(DEFAULT_LIMITS, cache_bytes=0))  # no cache hits
    before = _open_fds()
    bound = before + SOURCES + connection.MAX_OPEN
    sources: list[Source] = []
    try:
        for cart in carts:
            source, _ = open_source(str(cart), trust, store)
            sources.append(source)
            assert _open_fds() <= before + len(sources)  # one descriptor per source
        expected = {i: _skill(i % DISTINCT) for i in range(SOURCES)}

        def read_all(index: int) -> None:
            source = sources[index]
            (path, data), = expected[index].items()
            entry = source.tree.entries[path]
            assert source.read(entry, 0, entry.size + 1) == data
            assert _open_fds() <= bound

        for index in range(SOURCES):  # one reader: every source's anchor serves
            read_all(index)
        assert _open_fds() <= before + SOURCES
        with ThreadPoolExecutor(32) as pool:  # bursts of concurrent readers of each source
            list(pool.map(read_all, [i for i in range(SOURCES) for _ in range(8)]))
        assert _open_fds() <= bound
    finally:
        for source in sources:
            source.close()
    assert _open_fds() <= before


def test_connections_beyond_the_anchors_are_bounded_across_every_pool(
    tmp_path: Path, signer: cw.Signer
) -> None:
    cart = cw.build_cartridge(tmp_path / "one.acx", _skill(0), signer=signer,
                              publisher=PUBLISHER)
    copies = [tmp_path / f"c{i:03d}.acx" for i in range(SOURCES)]
    for copy in copies:
        shutil.copyfile(cart, copy)
    before = _open_fds()
    pools: list[connection.ConnectionPool] = []
    try:
        for copy in copies:
            pin = connection.PinnedFile(str(copy))
            try:
                pools.append(connection.ConnectionPool.serving(pin))
            finally:
                pin.close()
        assert _open_fds() <= before + SOURCES
        for pool in pools:  # three readers at once on each pool: the anchor and two more
            held = [pool.take() for _ in range(3)]
            for conn in held:
                assert conn.execute("SELECT count(*) FROM sqlar").fetchone()[0] == 1
            for conn in held:
                pool.give(conn)
            assert _open_fds() <= before + SOURCES + connection.MAX_OPEN
    finally:
        for pool in pools:
            pool.close()
    assert _open_fds() <= before
