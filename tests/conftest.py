"""Shared fixtures: isolated user state, signing keys, cartridges built by the independent
writer (``cartwriter``), an in-process CLI runner, the skills library's teardown and local key,
and the directories of the attacks made as another user; and the run's shape: every test that
mounts is also ``slow`` (outside the fast lane, ``-m "not slow"``), the run's temporary
directories lie under a short base so that socket paths below a test's HOME fit, and acxfs is
byte-compiled once before the first test (the commands and daemons the tests start load it
compiled)."""

from __future__ import annotations

import compileall
import contextlib
import io
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import is_hypothesis_test

from scripts import cartwriter as cw
from scripts.mounting import acxfs
from tests.support import REPO, attacker, library
from tests.support.demo import DEMO_CAPABILITIES, DEMO_FILES, DEMO_MEMORIES, PUBLISHER

_DEFAULT: Any = object()


# --- the run ---------------------------------------------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Unless `--basetemp` was given, this run's temporary directories go below a fresh
    `/tmp/acx-XXXXXXXX` instead of `/tmp/pytest-of-USER/pytest-N` (pytest-xdist adds
    `popen-gwN/` to it): a library's control socket, 39 bytes below a test's HOME, must fit
    a socket address (107 bytes) also for the tests that connect to it by its path. Workers
    are handed the controller's base; it is removed after a run that passed."""
    if config.option.basetemp is None and not hasattr(config, "workerinput"):
        config.option.basetemp = tempfile.mkdtemp(prefix="acx-")
        config.stash[_OWN_BASETEMP] = config.option.basetemp
    if not hasattr(config, "workerinput"):
        byte_compile()


def byte_compile() -> None:
    """Byte-compile acxfs and scripts once, before any worker starts, as ``pip install`` does
    for a regular install: the suite runs the real ``acxfs`` command and daemons thousands of
    times, and from a clone run with PYTHONDONTWRITEBYTECODE each of them would compile every
    module it imports again (about half of a short command's start-up). The compiled files go
    to the packages' ``__pycache__`` (ignored by git); Python checks them against their
    sources, so an edited module is never run stale."""
    for package in (REPO / "acxfs", REPO / "scripts"):
        compileall.compile_dir(package, quiet=2)


_OWN_BASETEMP = pytest.StashKey[str]()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    own = session.config.stash.get(_OWN_BASETEMP, None)
    if own is not None and exitstatus == 0:
        shutil.rmtree(own, ignore_errors=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that mounts is slow, whatever its module says; and the longest tests run first:
    pytest-xdist hands tests out in this order, so the benchmark smoke runs (a minute or more
    each), then the other slow tests, then the fast ones fill the workers up to the end,
    instead of one worker finishing a benchmark alone while the other has nothing left. Among
    the fast ones the property tests (Hypothesis: hundreds of examples, up to half a minute
    on a loaded machine) go first, so the fast lane does not end on one of them either."""
    for item in items:
        if item.get_closest_marker("fuse") is not None and \
                item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)
    items.sort(key=_run_order)  # stable: within each class, in the order of collection


def _run_order(item: pytest.Item) -> int:
    if item.nodeid.startswith("tests/test_bench_") and item.get_closest_marker("slow"):
        return 0
    if item.get_closest_marker("slow") is not None:
        return 1
    return 2 if is_hypothesis_test(getattr(item, "obj", None)) else 3


class CliResult(NamedTuple):
    """What ``acxfs.cli.main`` did: exit code and captured output."""

    code: int
    out: str
    err: str

    @property
    def verdict(self) -> str:
        """The first line of stdout (``verify``'s verdict line)."""
        return self.out.splitlines()[0] if self.out else ""


@pytest.fixture(autouse=True)
def isolated_user_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point every piece of per-user state into tmp_path. The trust dir is NOT created (a
    first run must cope with its absence); the XDG dirs exist, as on a real system."""
    trust = tmp_path / "trust"
    for name, value in {
        "ACXFS_TRUST_DIR": trust,
        "XDG_CONFIG_HOME": tmp_path / "xdg-config",
        "XDG_STATE_HOME": tmp_path / "xdg-state",
        "XDG_CACHE_HOME": tmp_path / "xdg-cache",
        "HOME": tmp_path / "home",
    }.items():
        if name != "ACXFS_TRUST_DIR":
            value.mkdir()
        monkeypatch.setenv(name, str(value))
    return trust


@pytest.fixture
def signer() -> cw.Signer:
    """The publisher key of the cartridges make_cartridge builds."""
    return cw.new_signer(bytes(range(32)))


@pytest.fixture
def other_signer() -> cw.Signer:
    """An unrelated key (an attacker's, or another publisher's)."""
    return cw.new_signer(bytes(range(100, 132)))


@pytest.fixture
def make_cartridge(tmp_path: Path, signer: cw.Signer) -> Callable[..., Path]:
    """Factory: ``make_cartridge(name="demo.acx", *, signer=<signer>, files=DEMO_FILES, **kw)``
    builds a signed cartridge in tmp_path with the demo skill, its references/ and scripts/,
    rom/knowledge/NOTES.md, one capability and one memory. ``signer=None`` leaves it unsigned;
    other keywords go to ``cartwriter.build_cartridge``."""

    default_signer = signer

    def make(
        name: str = "demo.acx",
        *,
        signer: cw.Signer | None = _DEFAULT,
        files: dict[str, bytes] | None = None,
        **kw: Any,
    ) -> Path:
        kw.setdefault("publisher", PUBLISHER)
        kw.setdefault("capabilities", DEMO_CAPABILITIES)
        kw.setdefault("memories", DEMO_MEMORIES)
        return cw.build_cartridge(
            tmp_path / name,
            DEMO_FILES if files is None else files,
            signer=default_signer if signer is _DEFAULT else signer,
            **kw,
        )

    return make


@pytest.fixture
def make_registry(tmp_path: Path) -> Callable[..., Path]:
    """Factory: ``make_registry(entries, name="registry.json")`` writes an
    acx.trust-registry/1 file in tmp_path and returns its path."""

    def make(entries: Iterable[dict[str, Any]], name: str = "registry.json") -> Path:
        path = tmp_path / name
        path.write_text(cw.registry_json(entries), encoding="utf-8")
        return path

    return make


@pytest.fixture
def trusted_registry(make_registry: Callable[..., Path], signer: cw.Signer) -> Path:
    """A registry holding ``signer`` as an active, eligible key of io.github.example."""
    return make_registry([cw.registry_entry(signer, PUBLISHER)], "trusted.registry.json")


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """``run_cli("verify", path, ...)`` runs ``acxfs.cli.main(argv)`` in-process and returns a
    CliResult (code, out, err); arguments are str()-ed. acxfs is imported lazily so that the
    suite collects while the package is being written. A SystemExit (argparse) is turned into
    its exit code."""

    def run(*argv: object) -> CliResult:
        from acxfs.cli import main

        capsys.readouterr()
        try:
            code = main([str(a) for a in argv])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return run


# --- real FUSE mounts ----------------------------------------------------------------------


@pytest.fixture(autouse=True)
def fuse_available(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[None]:
    """For tests marked ``fuse``: FUSE must be usable, and no mount may outlive the test.

    Such a test is skipped only when /dev/fuse is absent outside CI; under ``CI=true`` that
    fails loudly instead, so CI can never pass by skipping the mount tests. At teardown, any
    acxfs mount still under tmp_path is detached (``fusermount -uz``) and fails the test."""
    if request.node.get_closest_marker("fuse") is None:
        yield
        return
    if not os.path.exists("/dev/fuse"):
        if os.environ.get("CI") == "true":
            pytest.fail("/dev/fuse is missing, and CI=true: the FUSE mount tests must run in CI")
        pytest.skip("/dev/fuse is absent: FUSE mount tests need it")
    yield
    from scripts.mounting import acxfs_mounts_under, force_cleanup

    left = acxfs_mounts_under(tmp_path)
    for mountpoint in left:
        force_cleanup(mountpoint)
    assert not left, f"acxfs mounts left behind: {left}"


# --- the skills library --------------------------------------------------------------------


@pytest.fixture
def library_stops() -> Iterator[None]:
    """For the library's test modules (``pytest.mark.usefixtures("library_stops")``): stop the
    library daemon after the test; fail if a mount outlives it."""
    yield
    library.stop_library()


@pytest.fixture(scope="session")
def made_local_key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Once per session (per worker): a trust store holding only the local key pair the real
    ``acxfs keygen`` made in it. Only read: each test gets a copy (``local_key``)."""
    base = tmp_path_factory.mktemp("local-key")
    store = base / "trust"
    env = {**os.environ, "ACXFS_TRUST_DIR": str(store), "HOME": str(base)}
    env |= {f"XDG_{kind}_HOME": str(base / kind.lower()) for kind in ("CONFIG", "STATE", "CACHE")}
    library.ok(acxfs("keygen", env=env))  # before any test's own state: none of it is touched
    return store


@pytest.fixture
def local_key(made_local_key: Path, isolated_user_state: Path) -> None:
    """A local publisher key, made by the real ``acxfs keygen``, in this test's trust store:
    a copy (modes kept) of the session's, so a test may change or remove its own."""
    shutil.copytree(made_local_key, isolated_user_state, copy_function=shutil.copy2)


class Bulk(NamedTuple):
    """Cartridges of one skill each, packed once per worker (`two_hundred_bundles`)."""

    cartridges: list[Path]
    skill_md: dict[str, bytes]  # skill name -> the SKILL.md its cartridge holds


BULK_BUNDLES = 200


@pytest.fixture(scope="session")
def two_hundred_bundles(made_local_key: Path, tmp_path_factory: pytest.TempPathFactory) -> Bulk:
    """Once per session (per worker): 200 one-skill cartridges (``bulk-skill-000`` ...), each
    with a references/guide.md, packed by the real ``acxfs pack`` in this process (without 200
    interpreter start-ups) with the session's local key, so they verify under every test's
    `local_key`. Only read: ``acxfs add`` copies them into the test's own store. The tests that
    use them share one worker (``pytest.mark.xdist_group("two-hundred-bundles")``), which packs
    them once."""
    from acxfs.cli import main

    base = tmp_path_factory.mktemp("two-hundred")
    cartridges, skill_md = [], {}
    with pytest.MonkeyPatch.context() as env, contextlib.redirect_stdout(io.StringIO()):
        env.setenv("ACXFS_TRUST_DIR", str(made_local_key))
        env.setenv("HOME", str(base))
        for kind in ("CONFIG", "STATE", "CACHE"):
            env.setenv(f"XDG_{kind}_HOME", str(base / kind.lower()))
        for i in range(BULK_BUNDLES):
            name = f"bulk-skill-{i:03d}"
            skill = base / "src" / name
            (skill / "references").mkdir(parents=True)
            (skill / "SKILL.md").write_text(
                f"---\nname: {name}\ndescription: Bulk probe {name} for acxfs at scale.\n"
                f"license: Apache-2.0\n---\n\n# {name}\n\nSay hello.\n", encoding="utf-8")
            (skill / "references" / "guide.md").write_text(f"How to use {name}.\n" * 40)
            skill_md[name] = (skill / "SKILL.md").read_bytes()
            out = base / "carts" / f"{name}.acx"
            out.parent.mkdir(exist_ok=True)
            assert main(["pack", str(skill), "-o", str(out), "--publisher", PUBLISHER]) == 0
            cartridges.append(out)
    return Bulk(cartridges, skill_md)


# --- the agents -------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty working directory for the agent (no project-level skills)."""
    path = tmp_path / "project"
    path.mkdir()
    return path


# --- another user (the attacks of tests/safe/) -------------------------------------------


@pytest.fixture
def shared() -> Iterator[Path]:
    """A world-writable directory without the sticky bit, reachable by ``nobody``."""
    with attacker.shared_directory() as path:
        yield path


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A root-owned 0700 directory holding a 0600 file: what an attacker's link aims at."""
    return attacker.make_secret(tmp_path)
