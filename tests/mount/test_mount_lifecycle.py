"""Real mounts through the `acxfs` command: what every program sees is exactly what was signed.

Each test mounts with the installed `acxfs mount` (a subprocess that inherits the test's isolated
trust and state directories), looks at the mount with ordinary programs (`diff`, `find`, `stat`,
`ls`, `du`, `cat`, `getfattr`, the agentskills.io validator), and unmounts through
`mounting.mounted`, which fails the test if a mount or a daemon outlives it. Expected values come
from the cartridge rows themselves (read with sqlite3) or from `acxfs extract`, never from the
mount under test.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import hashlib
import json
import os
import pwd
import re
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from scripts import cartwriter as cw
from scripts.mounting import (
    acxfs,
    acxfs_command,
    acxfs_mounts_under,
    attempt_mount,
    canonical,
    daemon_pid,
    force_cleanup,
    mount_rows,
    mounted,
    pid_alive,
    processes_mentioning,
    read_xattr,
    run,
    status_entry,
    status_line,
    wait_for,
)
from tests.support import REAL, REPO
from tests.support.demo import DEMO_FILES, PUBLISHER

pytestmark = [pytest.mark.fuse, pytest.mark.slow]

HELLO = REPO / "examples" / "hello-acx"
GUIDE = "rom/skills/demo-skill/references/guide.md"

SECOND_SKILL_MD = """---
name: second-skill
description: A second skill packed beside hello-acx to test the --skills view.
license: Apache-2.0
---

# second-skill

Read `references/notes.md`.
"""


# --- cartridges ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Once per session: `acxfs keygen` (the default local key) and `acxfs pack` of
    examples/hello-acx alone (hello.acx) and beside a second skill (two.acx)."""
    base = tmp_path_factory.mktemp("packed")
    env = {**os.environ, "ACXFS_TRUST_DIR": str(base / "trust"), "HOME": str(base)}
    env |= {f"XDG_{kind}_HOME": str(base / kind.lower()) for kind in ("CONFIG", "STATE", "CACHE")}
    second = base / "second-skill"
    (second / "references").mkdir(parents=True)
    (second / "SKILL.md").write_text(SECOND_SKILL_MD, encoding="utf-8")
    (second / "references" / "notes.md").write_text("# Notes\n\nSecond skill.\n", encoding="utf-8")
    for argv in (
        ["keygen"],
        ["pack", HELLO, "-o", base / "hello.acx", "--publisher", PUBLISHER],
        ["pack", HELLO, second, "-o", base / "two.acx", "--publisher", PUBLISHER,
         "--id", "two-skills"],
    ):
        done = acxfs(*argv, env=env)
        assert done.returncode == 0, done.stderr
    return base


@pytest.fixture
def local_trust(packed: Path, isolated_user_state: Path) -> Path:
    """This test's trust dir holds the local key that signed the packed cartridges."""
    shutil.copytree(packed / "trust", isolated_user_state)
    return isolated_user_state


@pytest.fixture
def hello(packed: Path, local_trust: Path, tmp_path: Path) -> Path:
    """A private copy of hello.acx, which verifies as `verified / local` in this test."""
    return Path(shutil.copy(packed / "hello.acx", tmp_path / "hello.acx"))


@pytest.fixture
def two_skills(packed: Path, local_trust: Path, tmp_path: Path) -> Path:
    """A private copy of two.acx (skills hello-acx and second-skill), `verified / local`."""
    return Path(shutil.copy(packed / "two.acx", tmp_path / "two.acx"))


CARTRIDGES = ["packed-hello", "ada-ridge", "rex-calder", "scenario-research-designer"]


@pytest.fixture(params=CARTRIDGES)
def cartridge(request: pytest.FixtureRequest) -> tuple[Path, list[str]]:
    """A cartridge and the mount options that make it mount: the packed skill (verified /
    local), the two portable real cartridges (--min-trust portable) and the real one whose
    registry is shipped beside it (--registry)."""
    name = request.param
    if name == "packed-hello":
        return request.getfixturevalue("hello"), []
    if name == "scenario-research-designer":
        return REAL / f"{name}.acx", ["--registry", str(REAL / f"{name}.registry.json")]
    return REAL / f"{name}-1.0.0.acx", ["--min-trust", "portable"]


@functools.cache
def libfuse3_problem(name: str = "libfuse3") -> str:
    """Why the optional libfuse3 backend `name` cannot load here ('' when it can)."""
    done = run([sys.executable, "-c",
                f"from acxfs.mount import backend; backend.load({name!r})"])
    return "" if done.returncode == 0 else (done.stderr.strip().splitlines() or ["?"])[-1]


@pytest.fixture(params=["libfuse2", "libfuse3", "libfuse3-lowlevel"])
def backend(request: pytest.FixtureRequest) -> list[str]:
    """Mount options choosing the FUSE library. libfuse3 is an optional extra: skipped when
    missing, except under CI=true (scripts/setup.sh installs it), where that fails."""
    name = str(request.param)
    if name != "libfuse2" and (problem := libfuse3_problem(name)):
        if os.environ.get("CI") == "true":
            pytest.fail(f"the {name} backend must run in CI: {problem}")
        pytest.skip(f"{name} backend unavailable: {problem}")
    return ["--backend", name]


@dataclass(frozen=True)
class Signed:
    """One ROM file as its rows record it."""

    size: int
    executable: bool
    mtime: int
    oid: str


def _connect(container: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{container}?mode=ro&immutable=1", uri=True)


def signed_at_of(container: Path) -> int:
    """The statement's signedAt (what a stored mtime of 0 is shown as), in epoch seconds."""
    with contextlib.closing(_connect(container)) as conn:
        envelope = json.loads(conn.execute("SELECT envelope FROM signatures").fetchone()[0])
    statement = json.loads(cw.b64decode_any(envelope["payload"]))
    return int(dt.datetime.fromisoformat(statement["predicate"]["signedAt"]).timestamp())


def signed_files(container: Path) -> dict[str, Signed]:
    """The ROM files of a cartridge as its own rows record them (sqlar and objects)."""
    signed_at = signed_at_of(container)
    with contextlib.closing(_connect(container)) as conn:
        oids = dict(conn.execute(
            "SELECT source_ref, oid FROM objects WHERE kind = 'sqlar' AND zone = 'rom'"))
        rows = conn.execute(
            "SELECT name, mode, mtime, sz FROM sqlar WHERE substr(name, 1, 4) = 'rom/'"
        ).fetchall()
    return {
        name: Signed(size, bool((mode or 0) & 0o111), mtime or signed_at, oids[name])
        for name, mode, mtime, size in rows
        if mode is None or not stat.S_ISDIR(mode)
    }


def implied_dirs(names: list[str]) -> dict[str, int]:
    """Every directory the file names imply (with the root ''), and its number of subdirs."""
    dirs: dict[str, set[str]] = {"": set()}
    for name in names:
        parts = name.split("/")
        for i in range(1, len(parts)):
            dirs.setdefault("/".join(parts[:i]), set())
            dirs["/".join(parts[: i - 1])].add(parts[i - 1])
    return {d: len(subs) for d, subs in dirs.items()}


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def verdict_line(container: Path, *options: str) -> str:
    """The verdict line `acxfs verify` prints for the container."""
    return acxfs("verify", container, *options).stdout.splitlines()[0]


def assert_nothing_left(mountpoint: Path, container: Path) -> None:
    """No mount at `mountpoint`, no process naming the container or the mountpoint."""
    assert not mount_rows(mountpoint)
    assert not processes_mentioning(str(container))
    assert not processes_mentioning(canonical(mountpoint))


LS_LINE = re.compile(r"([-dlbcps][-rwxsStT]{9})\s+(\d+)\s+\S+\s+\S+\s+(\d+)\s+(\d+) (.*)")


def ls_entries(text: str, root: Path) -> dict[str, tuple[str, int, int, int]]:
    """`ls -laR --time-style=+%s` output as {relative path: (mode, nlink, size, mtime)}."""
    shown: dict[str, tuple[str, int, int, int]] = {}
    current = ""
    for line in text.splitlines():
        match = LS_LINE.fullmatch(line)
        if match is None:
            if line.endswith(":"):
                current = os.path.relpath(line[:-1], root).removeprefix(".")
            continue
        perms, nlink, size, mtime, name = match.groups()
        if name == ".." or (name == "." and current):
            continue
        rel = current if name == "." else f"{current}/{name}".lstrip("/")
        shown[rel] = (perms, int(nlink), int(size), int(mtime))
    return shown


def stats(mountpoint: Path) -> dict[str, int]:
    value: dict[str, int] = json.loads(read_xattr(mountpoint, "user.acx.stats"))
    return value


# --- what is served is what was signed ---------------------------------------------------------


def test_mounted_view_equals_extract(
    cartridge: tuple[Path, list[str]], backend: list[str], tmp_path: Path
) -> None:
    container, options = cartridge
    extracted = tmp_path / "extracted"
    done = acxfs("extract", container, extracted, *options)
    assert done.returncode == 0, done.stderr
    assert any(p.is_file() for p in extracted.rglob("*"))
    with mounted(container, tmp_path / "mnt", *options, *backend) as m:
        diff = run(["diff", "-r", extracted, m.mountpoint])
        assert (diff.returncode, diff.stdout, diff.stderr) == (0, "", "")


def test_every_served_file_hashes_to_its_signed_oid(
    cartridge: tuple[Path, list[str]], backend: list[str], tmp_path: Path
) -> None:
    container, options = cartridge
    files = signed_files(container)
    with mounted(container, tmp_path / "mnt", *options, *backend) as m:
        served_files = run(["find", m.mountpoint, "-type", "f", "-printf", r"%P\n"])
        paths = [str(m.mountpoint / name) for name in sorted(files)]
        sums = run(["sha256sum", *paths])
        assert sums.returncode == 0, sums.stderr
        served = {line[66:]: line[:64] for line in sums.stdout.splitlines()}
        attrs = run(["getfattr", "--absolute-names", "-n", "user.acx.oid", *paths])
        assert attrs.returncode == 0, attrs.stderr
        shown = dict(re.findall(r'# file: (.*)\nuser\.acx\.oid="(sha256:[0-9a-f]{64})"',
                                attrs.stdout))
    assert sorted(served_files.stdout.splitlines()) == sorted(files)
    for name, path in zip(sorted(files), paths, strict=True):
        assert shown[path] == files[name].oid == "sha256:" + served[path], name


def test_find_stat_ls_du_show_kinds_sizes_and_read_only_modes(
    cartridge: tuple[Path, list[str]], tmp_path: Path
) -> None:
    container, options = cartridge
    files = signed_files(container)
    dirs = implied_dirs(list(files))
    signed_at = signed_at_of(container)
    with mounted(container, tmp_path / "mnt", *options) as m:
        root = m.mountpoint
        found = run(["find", root, "-printf", r"%y %m %s %n %P\n"])
        listed = run(["ls", "-laR", "--time-style=+%s", root])
        stats_out = run(["stat", "-c", "%F|%a|%s|%h|%Y|%b|%n", root,
                         *[root / n for n in sorted(set(files) | set(dirs) - {""})]])
        du_bytes = run(["du", "-s", "-b", root])
        du_blocks = run(["du", "-s", "-B1", root])
    for done in (found, listed, stats_out, du_bytes, du_blocks):
        assert done.returncode == 0, done.stderr

    expected_find = {f"d 555 0 {2 + subdirs} {d}" for d, subdirs in dirs.items()}
    expected_find |= {f"f {555 if f.executable else 444} {f.size} 1 {n}"
                      for n, f in files.items()}
    assert sorted(found.stdout.splitlines()) == sorted(expected_find)

    assert len(stats_out.stdout.splitlines()) == len(files) + len(dirs)
    for line in stats_out.stdout.splitlines():
        kind, mode, size, nlink, mtime, blocks, path = line.split("|", 6)
        rel = os.path.relpath(path, root).removeprefix(".")
        if rel in files:
            f = files[rel]
            assert kind == ("regular file" if f.size else "regular empty file"), rel
            assert (mode, int(size), nlink, int(mtime)) == (
                "555" if f.executable else "444", f.size, "1", f.mtime), rel
            assert int(blocks) == (f.size + 511) // 512, rel
        else:
            assert (kind, mode, size, int(nlink), int(mtime)) == (
                "directory", "555", "0", 2 + dirs[rel], signed_at), rel

    shown = ls_entries(listed.stdout, root)
    expected_ls = {d: ("dr-xr-xr-x", 2 + subdirs, 0, signed_at) for d, subdirs in dirs.items()}
    expected_ls |= {n: ("-r-xr-xr-x" if f.executable else "-r--r--r--", 1, f.size, f.mtime)
                    for n, f in files.items()}
    assert shown == expected_ls

    assert int(du_bytes.stdout.split()[0]) == sum(f.size for f in files.values())
    assert int(du_blocks.stdout.split()[0]) == sum(
        (f.size + 511) // 512 * 512 for f in files.values())


# --- the agentskills.io reference validator -----------------------------------------------------


def skills_ref(*args: object) -> subprocess.CompletedProcess[str]:
    """The agentskills.io reference CLI (PyPI `skills-ref`, command `agentskills`)."""
    return run([sys.executable, "-m", "skills_ref.cli", *args])


def prompted_skills(xml: str) -> list[tuple[str, str]]:
    """(name, location) of each <skill> in `to-prompt` output."""
    return re.findall(r"<skill>\s*<name>\s*(.*?)\s*</name>.*?<location>\s*(.*?)\s*</location>",
                      xml, re.S)


def test_skills_ref_validates_and_prompts_a_skill_mount(hello: Path, tmp_path: Path) -> None:
    mountpoint = tmp_path / "skills" / "hello-acx"  # as ~/.claude/skills/<name> is
    with mounted(hello, mountpoint, "--skill", "hello-acx") as m:
        valid = skills_ref("validate", m.mountpoint)
        prompt = skills_ref("to-prompt", m.mountpoint)
    assert valid.returncode == 0, valid.stderr
    assert valid.stdout.startswith("Valid skill:")
    assert prompt.returncode == 0, prompt.stderr
    assert prompted_skills(prompt.stdout) == [("hello-acx", str(mountpoint / "SKILL.md"))]


def test_skills_ref_lists_every_skill_of_a_skills_mount(two_skills: Path, tmp_path: Path) -> None:
    with mounted(two_skills, tmp_path / "skills", "--skills") as m:
        names = sorted(os.listdir(m.mountpoint))
        valid = [skills_ref("validate", m.mountpoint / n) for n in names]
        prompt = skills_ref("to-prompt", *[m.mountpoint / n for n in names])
    assert names == ["hello-acx", "second-skill"]
    for done in valid:
        assert done.returncode == 0, done.stderr
    assert prompt.returncode == 0, prompt.stderr
    assert prompted_skills(prompt.stdout) == [
        (n, str(m.mountpoint / n / "SKILL.md")) for n in names]


# --- refusals ----------------------------------------------------------------------------------


def assert_refused(container: Path, tmp_path: Path, code: int, *options: str) -> str:
    """Mounting exits `code` with the verify verdict line first on stderr; nothing is left."""
    expected = verdict_line(container)
    mountpoint = tmp_path / "mnt"
    done = attempt_mount(container, mountpoint, *options)
    assert done.returncode == code, done.stderr
    assert done.stderr.splitlines()[0] == expected
    assert not mountpoint.exists()
    assert_nothing_left(mountpoint, container)
    return done.stderr


def test_legacy_cartridge_is_refused_by_default(
    make_cartridge: Callable[..., Path], tmp_path: Path
) -> None:
    err = assert_refused(make_cartridge("legacy.acx", signer=None), tmp_path, 3)
    assert err.startswith("warning / legacy")
    assert "--min-trust legacy" in err


def test_legacy_cartridge_mounts_with_min_trust_legacy_and_still_checks_digests(
    make_cartridge: Callable[..., Path], tmp_path: Path
) -> None:
    container = make_cartridge("legacy.acx", signer=None)
    original = DEMO_FILES[GUIDE]
    corrupted = original.replace(b"read", b"REAd")
    with sqlite3.connect(container) as conn:  # corruption: bytes differ from the recorded oid
        conn.execute("UPDATE sqlar SET data=? WHERE name=?", (cw.compress(corrupted), GUIDE))
    with mounted(container, tmp_path / "mnt", "--min-trust", "legacy") as m:
        notes = (m.mountpoint / "rom" / "knowledge" / "NOTES.md").read_bytes()
        done = subprocess.run(["cat", str(m.mountpoint / GUIDE)], capture_output=True)
        trust = read_xattr(m.mountpoint, "user.acx.trust")
    assert "warning / legacy" in m.stderr and "corruption, not tampering" in m.stderr
    assert notes == DEMO_FILES["rom/knowledge/NOTES.md"]
    assert done.returncode != 0 and b"Input/output error" in done.stderr and done.stdout == b""
    assert trust == "legacy"


def test_empty_file_with_a_wrong_recorded_digest_is_eio_not_empty(
    make_cartridge: Callable[..., Path], tmp_path: Path, backend: list[str]
) -> None:
    # No read ever reaches an empty file; the mount must still not show it as intact.
    empty = "rom/skills/demo-skill/references/empty.md"
    container = make_cartridge("legacy.acx", signer=None, files={**DEMO_FILES, empty: b""})
    with sqlite3.connect(container) as conn:
        conn.execute("UPDATE objects SET oid=? WHERE source_ref=?", (cw.oid_of(b"gone"), empty))
    with mounted(container, tmp_path / "mnt", "--min-trust", "legacy", *backend) as m:
        listed = sorted(os.listdir(m.mountpoint / "rom/skills/demo-skill/references"))
        done = subprocess.run(["cat", str(m.mountpoint / empty)], capture_output=True)
        notes = (m.mountpoint / "rom" / "knowledge" / "NOTES.md").read_bytes()
        stats = json.loads(read_xattr(m.mountpoint, "user.acx.stats"))
    assert "empty.md" in listed
    assert done.returncode != 0 and b"Input/output error" in done.stderr and done.stdout == b""
    assert notes == DEMO_FILES["rom/knowledge/NOTES.md"]
    assert stats["tamper_events"] == 1


def test_portable_cartridge_is_refused_by_default(
    make_cartridge: Callable[..., Path], signer: cw.Signer, tmp_path: Path
) -> None:
    container = make_cartridge("portable.acx")
    err = assert_refused(container, tmp_path, 4)
    assert err.startswith("warning / portable")
    assert signer.keyid in err
    assert PUBLISHER in err
    assert f"acxfs trust add {container}" in err


def test_portable_cartridge_mounts_with_min_trust_portable(
    make_cartridge: Callable[..., Path], tmp_path: Path
) -> None:
    container = make_cartridge("portable.acx")
    with mounted(container, tmp_path / "mnt", "--min-trust", "portable") as m:
        notes = (m.mountpoint / "rom" / "knowledge" / "NOTES.md").read_bytes()
        trust = read_xattr(m.mountpoint, "user.acx.trust")
    assert "warning / portable" in m.stderr
    assert notes == b"# Notes\n\nThese notes are signed ROM content.\n"
    assert trust == "portable"


@pytest.mark.parametrize("where", ["inside-the-mountpoint", "the-container", "a-hard-link",
                                   "a-fifo", "in-the-trust-store"])
def test_log_file_the_mount_would_write_into_is_refused(
    where: str, hello: Path, tmp_path: Path
) -> None:
    # Inside the mountpoint, the daemon's first log line would wait on its own mount forever,
    # as would a write to a FIFO nobody reads; the container (under any name) and the trust
    # store are what acxfs reads, never what it writes.
    mountpoint = tmp_path / "mnt"
    store = Path(os.environ["ACXFS_TRUST_DIR"])
    log = {"inside-the-mountpoint": mountpoint / "acxfs.log", "the-container": hello,
           "a-hard-link": tmp_path / "log.txt", "a-fifo": tmp_path / "log.fifo",
           "in-the-trust-store": store / "keys" / "notes.log"}[where]
    if where == "a-hard-link":
        os.link(hello, log)
    if where == "a-fifo":
        os.mkfifo(log)
    before = hashlib.sha256(hello.read_bytes()).hexdigest()
    done = attempt_mount(hello, mountpoint, "--log-file", log, timeout=30)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("acxfs: error: --log-file"), lines
    assert_nothing_left(mountpoint, hello)
    assert not mountpoint.exists()
    assert hashlib.sha256(hello.read_bytes()).hexdigest() == before


@pytest.mark.parametrize("name", ["no\u00a0break", "line\u2028sep", "cr\rvt\x0b"],
                         ids=["nbsp", "line-separator", "cr-vt"])
def test_odd_mountpoint_names_are_listed_and_unmounted(
    hello: Path, tmp_path: Path, name: str
) -> None:
    # /proc/mounts escapes only space, tab, newline and backslash: every other byte is raw.
    mountpoint = tmp_path / name
    done = acxfs("mount", hello, mountpoint)
    try:
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        line = status_line(mountpoint)  # only this test's mount: others may exist
        assert str(hello) in line and "no state" not in line and line.endswith(" running")
        gone = acxfs("umount", mountpoint)
        assert gone.returncode == 0, gone.stderr
        assert not os.path.ismount(mountpoint)
    finally:
        force_cleanup(mountpoint)


def test_a_mount_is_listed_while_another_mountpoint_is_not_utf8(
    hello: Path, tmp_path: Path
) -> None:
    other = tmp_path / os.fsdecode(b"other\xffmnt")
    other.mkdir()
    refused = acxfs("mount", hello, other)  # fusepy passes paths as UTF-8: one clear line
    assert refused.returncode == 2 and "is not a UTF-8 path" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", os.fsencode(other)],
                   check=True)
    try:
        with mounted(hello, tmp_path / "mnt") as m:
            assert acxfs("status").returncode == 0
            assert str(hello) in status_line(m.mountpoint)
    finally:
        subprocess.run(["umount", os.fsencode(other)], check=False)


def test_an_unusable_state_directory_is_one_line_before_anything_starts(
    hello: Path, tmp_path: Path
) -> None:
    not_a_dir = tmp_path / "state-file"
    not_a_dir.write_text("a file\n")
    env = dict(os.environ, XDG_STATE_HOME=str(not_a_dir))
    mountpoint = tmp_path / "mnt"
    done = subprocess.run([*acxfs_command(), "mount", str(hello), str(mountpoint)], env=env,
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot use the state directory" in lines[0], lines
    assert_nothing_left(mountpoint, hello)
    assert not mountpoint.exists()


def test_a_failed_mount_never_undoes_another_live_mount(hello: Path, tmp_path: Path) -> None:
    # Two mounts racing for one mountpoint: the loser's clean-up must leave the winner alone.
    from acxfs.mount.lifecycle import _stop_failed_daemon
    from acxfs.mount.records import read_state

    with mounted(hello, tmp_path / "mnt") as m:
        loser = os.fork()
        if loser == 0:
            os._exit(1)
        _stop_failed_daemon(loser, str(m.mountpoint), grace=1)
        assert os.path.ismount(m.mountpoint)
        state = read_state(str(m.mountpoint))
        assert state is not None and state.pid == m.pid
        assert (m.mountpoint / "rom").is_dir()


def test_busy_umount_detaches_and_the_old_daemon_keeps_off_a_new_mounts_state(
    hello: Path, tmp_path: Path
) -> None:
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    first = acxfs("mount", hello, mountpoint)
    assert first.returncode == 0, first.stderr
    old_pid = daemon_pid(mountpoint, first.stderr)
    try:
        with open(mountpoint / "rom" / "skills" / "hello-acx" / "SKILL.md", "rb") as held:
            done = acxfs("umount", mountpoint)
            assert done.returncode == 0 and "detached while files were open" in done.stdout
            with mounted(hello, mountpoint) as again:
                held.read()  # still served by the old daemon
                held.close()
                assert old_pid is not None
                assert wait_for(lambda: not pid_alive(old_pid), 20), "old daemon lingers"
                line = status_line(mountpoint)  # the new mount; not another test's
                assert f"pid={again.pid}" in line and "no state" not in line
    finally:
        force_cleanup(mountpoint, old_pid)


def test_a_daemon_that_ignores_sigterm_is_killed_after_a_failed_start(tmp_path: Path) -> None:
    from acxfs.mount.lifecycle import _stop_failed_daemon

    child = os.fork()
    if child == 0:  # a stand-in for a daemon stuck before it became ready
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(60)
        os._exit(0)
    os.kill(child, signal.SIGTERM)
    started = time.monotonic()
    _stop_failed_daemon(child, str(tmp_path / "never-mounted"), grace=0.5)
    assert time.monotonic() - started < 10
    with pytest.raises(ChildProcessError):  # reaped: no zombie left behind
        os.waitpid(child, os.WNOHANG)


def test_injected_rom_row_is_refused(make_cartridge: Callable[..., Path], tmp_path: Path) -> None:
    container = make_cartridge()
    evil = b"---\nname: evil\ndescription: injected after signing\n---\n"
    with contextlib.closing(sqlite3.connect(container)) as conn:
        conn.execute("INSERT INTO sqlar (name, mode, mtime, sz, data) VALUES (?, 420, 0, ?, ?)",
                     ("rom/skills/evil/SKILL.md", len(evil), evil))
        conn.commit()
    err = assert_refused(container, tmp_path, 5, "--min-trust", "legacy")
    assert err.startswith("invalid / tampered")
    assert "rom/skills/evil/SKILL.md" in err.splitlines()[0]


def test_edited_objects_row_is_refused(make_cartridge: Callable[..., Path], tmp_path: Path) -> None:
    container = make_cartridge()
    fake = "sha256:" + hashlib.sha256(b"other bytes").hexdigest()
    with contextlib.closing(sqlite3.connect(container)) as conn:
        conn.execute("UPDATE objects SET oid = ? WHERE source_ref = ?", (fake, GUIDE))
        conn.commit()
    err = assert_refused(container, tmp_path, 5, "--min-trust", "legacy")
    assert err.startswith("invalid / tampered")


@pytest.mark.parametrize("fault", ["not-sqlite", "symlink-row"])
def test_malformed_cartridge_is_refused(
    fault: str, make_cartridge: Callable[..., Path], tmp_path: Path
) -> None:
    if fault == "not-sqlite":
        container = tmp_path / "garbage.acx"
        container.write_bytes(b"this is not a cartridge\n" * 64)
    else:
        container = make_cartridge(modes={"rom/knowledge/NOTES.md": 0o120777})
    err = assert_refused(container, tmp_path, 6, "--min-trust", "legacy")
    assert err.startswith("invalid / malformed")


# --- content tampered after signing ------------------------------------------------------------


def test_with_save_labels_the_unsigned_zone_as_unsigned(
    make_cartridge: Callable[..., Path], trusted_registry: Path, tmp_path: Path
) -> None:
    recorded, bare = "save/notes/recorded.md", "save/notes/bare.md"
    container = make_cartridge(files={**DEMO_FILES, recorded: b"kept\n", bare: b"no digest\n"})
    with sqlite3.connect(container) as conn:  # a SAVE object records a digest; signs nothing
        conn.execute("INSERT INTO objects VALUES (?, 'sqlar', ?, 'raw', 'save', 6)",
                     (cw.oid_of(b"kept\n"), recorded))
    with mounted(container, tmp_path / "mnt", "--with-save", "--registry", trusted_registry) as m:
        kept = (m.mountpoint / recorded).read_bytes()
        done = subprocess.run(["cat", str(m.mountpoint / bare)], capture_output=True)
        names = run(["getfattr", "-d", "-m", "-", str(m.mountpoint / recorded)]).stdout
        rom = run(["getfattr", "-d", "-m", "-", str(m.mountpoint / GUIDE)]).stdout
        stats = json.loads(read_xattr(m.mountpoint, "user.acx.stats"))
        status = "\n".join(status_entry(m.mountpoint))
    assert kept == b"kept\n"
    assert done.returncode != 0 and b"Input/output error" in done.stderr
    assert "user.acx.recorded_oid=" in names and "user.acx.oid=" not in names
    assert "user.acx.oid=" in rom
    assert stats["tamper_events"] == 0  # a file with nothing to check against is no tamper event
    assert "unsigned save/" in status and "unsigned save/" in m.stderr


def test_a_directory_without_skill_md_is_not_a_skill(
    make_cartridge: Callable[..., Path], trusted_registry: Path, tmp_path: Path
) -> None:
    container = make_cartridge(files={**DEMO_FILES, "rom/skills/nomd/notes.md": b"no skill\n"})
    done = attempt_mount(container, tmp_path / "mnt", "--skill", "nomd",
                         "--registry", trusted_registry)
    assert done.returncode == 2 and "no skill 'nomd'" in done.stderr
    assert "it has: demo-skill" in done.stderr and "nomd," not in done.stderr
    with mounted(container, tmp_path / "skills" / "nomd", "--registry", trusted_registry) as m:
        assert "mounting skill" not in m.stderr
        assert (m.mountpoint / "rom").is_dir()  # the whole container, not a false skill


def test_an_unverified_signature_keyid_is_shown_as_claimed(
    make_cartridge: Callable[..., Path], tmp_path: Path
) -> None:
    container = make_cartridge(embed_public_key=False)  # no key here can check it
    with mounted(container, tmp_path / "mnt", "--min-trust", "legacy") as m:
        names = run(["getfattr", "-d", "-m", "-", str(m.mountpoint)]).stdout
    assert "user.acx.claimed_keyid=" in names and "user.acx.keyid=" not in names


def test_stale_oid_content_is_eio_for_that_file_only(
    make_cartridge: Callable[..., Path], trusted_registry: Path, backend: list[str],
    tmp_path: Path
) -> None:
    container = make_cartridge()
    original = DEMO_FILES[GUIDE]
    forged = original.replace(b"read.", b"RUIN.")
    assert len(forged) == len(original) and forged != original
    with contextlib.closing(sqlite3.connect(container)) as conn:
        changed = conn.execute("UPDATE sqlar SET data = ? WHERE name = ?",
                               (cw.compress(forged, "raw"), GUIDE)).rowcount
        conn.commit()
    assert changed == 1
    assert acxfs("verify", "--quick", container, "--registry", trusted_registry).returncode == 0

    log = tmp_path / "acxfs.log"
    with mounted(container, tmp_path / "mnt", "--registry", trusted_registry,
                 "--log-file", log, *backend) as m:
        bad = run(["cat", m.mountpoint / GUIDE])
        others = {n: run(["cat", m.mountpoint / n]) for n in DEMO_FILES if n != GUIDE}
        counters = stats(m.mountpoint)
        still_mounted = bool(mount_rows(m.mountpoint))
        daemon_alive = pid_alive(m.pid)
    assert bad.returncode != 0
    assert "Input/output error" in bad.stderr
    assert bad.stdout == ""
    for name, done in others.items():
        assert done.returncode == 0, (name, done.stderr)
        assert done.stdout.encode() == DEMO_FILES[name]
    assert still_mounted and daemon_alive
    assert counters["tamper_events"] >= 1
    tamper_lines = [line for line in log.read_text().splitlines() if "] tamper: " in line]
    assert len(tamper_lines) == 1, tamper_lines
    assert GUIDE in tamper_lines[0]


# --- read-only ---------------------------------------------------------------------------------


WRITES = {
    "touch": ["touch", "{file}"],
    "touch-new": ["touch", "{dir}/new-file"],
    "rm": ["rm", "-f", "{file}"],
    "mkdir": ["mkdir", "{dir}/new-dir"],
    "mv": ["mv", "{file}", "{dir}/renamed.md"],
    "chmod": ["chmod", "u+w", "{file}"],
    "echo-append": ["sh", "-c", 'echo x >> "$0"', "{file}"],
}


@pytest.mark.parametrize("operation", list(WRITES))
def test_write_operation_fails_with_read_only_file_system(
    operation: str, hello: Path, tmp_path: Path
) -> None:
    before = sha256_file(hello)
    with mounted(hello, tmp_path / "mnt", "--skill", "hello-acx") as m:
        target = m.mountpoint / "SKILL.md"
        argv = [a.format(file=target, dir=m.mountpoint / "references") for a in WRITES[operation]]
        done = run(argv)
        served = target.read_bytes()
        names = sorted(os.listdir(m.mountpoint / "references"))
    assert done.returncode != 0
    assert "Read-only file system" in done.stderr
    assert served == (HELLO / "SKILL.md").read_bytes()
    assert names == ["guide.md"]
    assert sha256_file(hello) == before


def test_every_write_fails_read_only_on_either_backend(
    hello: Path, backend: list[str], tmp_path: Path
) -> None:
    before = sha256_file(hello)
    with mounted(hello, tmp_path / "mnt", "--skill", "hello-acx", *backend) as m:
        target = m.mountpoint / "SKILL.md"
        results = {
            operation: run([a.format(file=target, dir=m.mountpoint / "references")
                            for a in argv])
            for operation, argv in WRITES.items()
        }
        served = target.read_bytes()
        names = sorted(os.listdir(m.mountpoint / "references"))
    for operation, done in results.items():
        assert done.returncode != 0, operation
        assert "Read-only file system" in done.stderr, (operation, done.stderr)
    assert served == (HELLO / "SKILL.md").read_bytes()
    assert names == ["guide.md"]
    assert sha256_file(hello) == before


STAT_WHILE_LISTING = """
import os, stat, sys
with os.scandir(sys.argv[1]) as listing:
    for item in listing:
        st = os.stat(item.path)
        print(f"f {stat.S_IMODE(st.st_mode):o} {st.st_size} {item.name}")
"""


def test_large_directory_lists_every_entry_with_its_attributes_on_either_backend(
    make_cartridge: Callable[..., Path], backend: list[str], tmp_path: Path
) -> None:
    """More entries than one directory reply holds: over libfuse3 the listing comes as
    READDIRPLUS parts, each resuming at an entry's offset and carrying its attributes; over
    libfuse2 as plain READDIR. Either way every name appears once, with its signed size and
    read-only mode, and reads back its signed bytes."""
    folder = "rom/skills/demo-skill/references"
    many = {f"{folder}/entry-{i:04d}-{'x' * 48}.md": f"entry {i}\n".encode() * (1 + i % 5)
            for i in range(700)}
    container = make_cartridge(files={**DEMO_FILES, **many})
    with mounted(container, tmp_path / "mnt", "--min-trust", "portable", *backend) as m:
        served = m.mountpoint / folder
        listed = run(["find", served, "-mindepth", "1", "-printf", r"%y %m %s %f\n"])
        names = os.listdir(served)
        # A stat between parts: after a LOOKUP the kernel asks for the next part as READDIRPLUS.
        walked = run([sys.executable, "-c", STAT_WHILE_LISTING, served])
        contents = {f"{folder}/{name}": (served / name).read_bytes() for name in names}
    assert listed.returncode == 0, listed.stderr
    expected = {f"f 444 {len(data)} {name.rsplit('/', 1)[1]}"
                for name, data in {**many, f"{folder}/guide.md": DEMO_FILES[f"{folder}/guide.md"]}
                .items()}
    assert len(names) == len(set(names)) == len(expected)
    assert sorted(listed.stdout.splitlines()) == sorted(expected)
    assert walked.returncode == 0, walked.stderr
    assert sorted(walked.stdout.splitlines()) == sorted(expected)
    assert contents == {name: data for name, data in {**DEMO_FILES, **many}.items()
                        if name.startswith(folder + "/")}


def test_libfuse3_backend_without_mfusepy_is_one_clear_line(hello: Path, tmp_path: Path) -> None:
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "mfusepy.py").write_text("raise ImportError('simulated: not installed')\n")
    env = dict(os.environ, PYTHONPATH=str(shadow))
    mountpoint = tmp_path / "mnt"
    done = acxfs("mount", hello, mountpoint, "--backend", "libfuse3", env=env)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        "acxfs: error: --backend libfuse3 needs mfusepy (simulated: not installed); "
        "pip install 'acxfs[fuse3]'"
    ] or "libfuse3-3" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not mount_rows(mountpoint) and not mountpoint.exists()


# --- lifecycle ---------------------------------------------------------------------------------


def test_background_mount_returns_only_when_live(hello: Path, tmp_path: Path) -> None:
    mountpoint = tmp_path / "mnt"
    done = acxfs("mount", hello, mountpoint)
    live = os.path.ismount(mountpoint)  # the first thing after the command returned
    pid = daemon_pid(mountpoint, done.stderr)
    try:
        names = sorted(os.listdir(mountpoint)) if live else []
        umount = acxfs("umount", mountpoint)
    finally:
        leftovers = force_cleanup(mountpoint, pid)
    assert done.returncode == 0, done.stderr
    assert live
    assert names == ["rom"]
    assert pid is not None
    assert umount.returncode == 0, umount.stderr
    assert not leftovers


def test_umount_leaves_no_mount_and_no_daemon(hello: Path, tmp_path: Path) -> None:
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    done = acxfs("mount", hello, mountpoint)
    assert done.returncode == 0, done.stderr
    pid = status_pid(mountpoint)
    try:
        assert pid_alive(pid)
        umount = acxfs("umount", mountpoint)
    finally:
        force_cleanup(mountpoint, pid)
    assert umount.returncode == 0, umount.stderr
    assert umount.stdout.strip() == f"unmounted {mountpoint}"
    assert not mount_rows(mountpoint)
    assert not pid_alive(pid)
    assert mountpoint.is_dir()  # it existed before the mount, so it stays
    assert_nothing_left(mountpoint, hello)
    assert status_entry(mountpoint) == []


def status_pid(mountpoint: Path) -> int:
    """The daemon pid `acxfs status` shows for the mountpoint."""
    out = acxfs("status").stdout
    match = re.search(rf"^{re.escape(canonical(mountpoint))}\s.*\bpid=(\d+) running$", out, re.M)
    assert match, out
    return int(match.group(1))


def test_sigterm_unmounts_and_stops_the_daemon(hello: Path, tmp_path: Path) -> None:
    mountpoint = tmp_path / "new" / "mnt"  # missing: acxfs creates it, and removes it again
    done = acxfs("mount", hello, mountpoint)
    assert done.returncode == 0, done.stderr
    pid = status_pid(mountpoint)
    try:
        os.kill(pid, signal.SIGTERM)
        unmounted = wait_for(lambda: not mount_rows(mountpoint), 10)
        exited = wait_for(lambda: not pid_alive(pid), 10)
    finally:
        leftovers = force_cleanup(mountpoint, pid)
    assert unmounted and exited, leftovers
    assert not mountpoint.exists()
    assert_nothing_left(mountpoint, hello)
    log = (tmp_path / "xdg-state" / "acxfs" / "acxfs.log").read_text()
    assert f"stop: {canonical(mountpoint)}" in log


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP],
                         ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_foreground_mount_stays_attached_until_signalled(
    hello: Path, tmp_path: Path, backend: list[str], stop: signal.Signals
) -> None:
    mountpoint = tmp_path / "mnt"
    proc = subprocess.Popen([*acxfs_command(), "mount", "-f", hello, mountpoint, *backend],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        live = wait_for(lambda: os.path.ismount(mountpoint), 15)
        attached = proc.poll() is None
        skill = (mountpoint / "rom" / "skills" / "hello-acx" / "SKILL.md").read_bytes()
        proc.send_signal(stop)  # libfuse3 ends its loop with 8 then: still a clean stop
        _out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        leftovers = force_cleanup(mountpoint, proc.pid)
    assert live and attached
    assert skill == (HELLO / "SKILL.md").read_bytes()
    assert proc.returncode == 0, err
    assert not leftovers
    assert not mountpoint.exists()  # acxfs created it, so it removed it


def test_umount_cleans_up_after_a_killed_daemon(hello: Path, tmp_path: Path) -> None:
    mountpoint = tmp_path / "mnt"
    done = acxfs("mount", hello, mountpoint)
    assert done.returncode == 0, done.stderr
    pid = status_pid(mountpoint)
    try:
        os.kill(pid, signal.SIGKILL)
        assert wait_for(lambda: not pid_alive(pid), 10)
        status = acxfs("status").stdout
        stale = run(["ls", mountpoint])
        umount = acxfs("umount", mountpoint)
    finally:
        leftovers = force_cleanup(mountpoint, pid)
    assert re.search(rf"^{re.escape(canonical(mountpoint))} .*\bSTALE\b", status, re.M), status
    assert "Transport endpoint is not connected" in stale.stderr
    assert umount.returncode == 0, umount.stderr
    assert not leftovers
    assert not mountpoint.exists()


def test_background_daemon_leaves_the_callers_directory(hello: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    shutil.move(hello, work / "hello.acx")
    done = acxfs("mount", "hello.acx", "mnt", "--log-file", "acxfs.log", cwd=work)
    assert done.returncode == 0, done.stderr
    pid = status_pid(work / "mnt")
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
        skill = (work / "mnt" / "rom" / "skills" / "hello-acx" / "SKILL.md").read_bytes()
        fsname = mount_rows(work / "mnt")[0][0]
        umount = acxfs("umount", "mnt", cwd=work)
    finally:
        leftovers = force_cleanup(work / "mnt", pid)
    assert cwd == "/"
    assert skill == (HELLO / "SKILL.md").read_bytes()  # the relative container still reads
    assert fsname == f"acxfs:{work / 'hello.acx'}"
    assert umount.returncode == 0 and not leftovers
    assert "stop: " in (work / "acxfs.log").read_text()


def test_second_mount_on_same_mountpoint_fails_clearly(hello: Path, tmp_path: Path) -> None:
    with mounted(hello, tmp_path / "mnt") as m:
        second = attempt_mount(hello, m.mountpoint)
        rows = mount_rows(m.mountpoint)
        still = (m.mountpoint / "rom" / "skills" / "hello-acx" / "SKILL.md").read_bytes()
    assert second.returncode != 0
    assert second.stderr.strip().splitlines() == [
        f"acxfs: error: {m.mountpoint} is already a mount point"]
    assert len(rows) == 1
    assert still == (HELLO / "SKILL.md").read_bytes()


def test_missing_mountpoint_is_created_and_removed_at_unmount(hello: Path, tmp_path: Path) -> None:
    mountpoint = tmp_path / "a" / "b" / "mnt"
    (tmp_path / "kept").mkdir()
    with mounted(hello, mountpoint) as m:
        assert m.mountpoint.is_dir()
    assert not (tmp_path / "a").exists()  # the parents it made for the mountpoint too
    inside = tmp_path / "kept" / "x" / "mnt"
    with mounted(hello, inside):
        (tmp_path / "kept" / "x" / "mine.txt").write_text("added while mounted\n")
    assert not inside.exists()
    assert (tmp_path / "kept" / "x" / "mine.txt").exists()  # a parent someone filled stays


@pytest.mark.parametrize("stop", ["umount", "SIGTERM"])
def test_a_relative_missing_mountpoint_and_its_parents_are_removed_at_unmount(
    hello: Path, tmp_path: Path, stop: str
) -> None:
    # The daemon works from "/", the umount from the caller's directory: both must find the
    # directories made for a mountpoint given relative to where `mount` ran.
    mountpoint = tmp_path / "a" / "b" / "mnt"
    done = acxfs("mount", hello, "a/b/mnt", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    pid = status_pid(mountpoint)
    try:
        if stop == "umount":
            assert acxfs("umount", "a/b/mnt", cwd=tmp_path).returncode == 0
        else:
            os.kill(pid, signal.SIGTERM)
        assert wait_for(lambda: not pid_alive(pid), 10)
    finally:
        leftovers = force_cleanup(mountpoint, pid)
    assert not leftovers
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("problem", ["not-empty", "a-file"])
def test_unusable_mountpoint_fails_with_one_line(
    problem: str, hello: Path, tmp_path: Path
) -> None:
    mountpoint = tmp_path / "mnt"
    if problem == "not-empty":
        mountpoint.mkdir()
        (mountpoint / "keep.txt").write_text("mine\n")
        expected = "is not empty"
    else:
        mountpoint.write_text("a file\n")
        expected = "is not a directory"
    done = attempt_mount(hello, mountpoint)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("acxfs: error: ") and expected in lines[0]
    assert_nothing_left(mountpoint, hello)
    if problem == "not-empty":
        assert os.listdir(mountpoint) == ["keep.txt"]
    else:
        assert mountpoint.read_text() == "a file\n"


def test_status_lists_the_mount_with_container_view_and_verdict(
    hello: Path, tmp_path: Path
) -> None:
    verdict = verdict_line(hello)
    with mounted(hello, tmp_path / "mnt", "--skill", "hello-acx") as m:
        out = acxfs("status").stdout.splitlines()
    where = out.index(next(line for line in out if line.startswith(canonical(m.mountpoint) + " ")))
    assert out[where].split() == [canonical(m.mountpoint), str(hello), "view=skill", "hello-acx",
                                  f"pid={m.pid}", "running"]
    assert out[where + 1].strip() == verdict
    assert verdict.startswith("verified / local")


def test_proc_mounts_shows_fsname_and_type(hello: Path, tmp_path: Path) -> None:
    with mounted(hello, tmp_path / "mnt") as m:
        fsname, where, fstype, options = m.proc_row()[:4]
    assert fsname == f"acxfs:{hello}"
    assert where == canonical(m.mountpoint)
    assert fstype == "fuse.acxfs"
    assert "ro" in options.split(",")


# --- views -------------------------------------------------------------------------------------


def test_default_view_root_holds_rom(hello: Path, tmp_path: Path) -> None:
    with mounted(hello, tmp_path / "mnt") as m:
        top = sorted(os.listdir(m.mountpoint))
        skill = (m.mountpoint / "rom" / "skills" / "hello-acx" / "SKILL.md").read_bytes()
    assert top == ["rom"]
    assert skill == (HELLO / "SKILL.md").read_bytes()


def test_skill_view_roots_the_mount_at_the_skill(hello: Path, tmp_path: Path) -> None:
    with mounted(hello, tmp_path / "mnt", "--skill", "hello-acx") as m:
        top = sorted(os.listdir(m.mountpoint))
        script = (m.mountpoint / "scripts" / "greet.sh").read_bytes()
    assert top == ["SKILL.md", "references", "scripts"]
    assert script == (HELLO / "scripts" / "greet.sh").read_bytes()


def test_skills_view_roots_the_mount_at_the_skills_dir(two_skills: Path, tmp_path: Path) -> None:
    with mounted(two_skills, tmp_path / "mnt", "--skills") as m:
        top = sorted(os.listdir(m.mountpoint))
        second = (m.mountpoint / "second-skill" / "SKILL.md").read_text(encoding="utf-8")
    assert top == ["hello-acx", "second-skill"]
    assert second == SECOND_SKILL_MD


def test_mountpoint_name_selects_the_skill_and_says_so(hello: Path, tmp_path: Path) -> None:
    with mounted(hello, tmp_path / "agent" / "hello-acx") as m:
        top = sorted(os.listdir(m.mountpoint))
    said = [line for line in m.stderr.splitlines() if "mountpoint's name" in line]
    assert len(said) == 1 and "hello-acx" in said[0]
    assert top == ["SKILL.md", "references", "scripts"]


def test_root_view_overrides_the_mountpoint_name(hello: Path, tmp_path: Path) -> None:
    with mounted(hello, tmp_path / "agent" / "hello-acx", "--root-view") as m:
        top = sorted(os.listdir(m.mountpoint))
    assert top == ["rom"]
    assert "mountpoint's name" not in m.stderr


def test_unknown_skill_is_an_error_listing_the_skills(two_skills: Path, tmp_path: Path) -> None:
    mountpoint = tmp_path / "mnt"
    done = attempt_mount(two_skills, mountpoint, "--skill", "no-such-skill")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "no-such-skill" in lines[0]
    assert "hello-acx" in lines[0] and "second-skill" in lines[0]
    assert not mountpoint.exists()
    assert_nothing_left(mountpoint, two_skills)


def test_default_view_inside_a_skills_dir_prints_a_hint(two_skills: Path, tmp_path: Path) -> None:
    with mounted(two_skills, tmp_path / "skills" / "bundle") as m:
        top = sorted(os.listdir(m.mountpoint))
    hints = [line for line in m.stderr.splitlines() if "hint" in line]
    assert len(hints) == 1
    assert "--skill NAME" in hints[0] and "--skills" in hints[0]
    assert top == ["rom"]


# --- laziness ----------------------------------------------------------------------------------


def test_listing_inflates_no_blob_and_one_cat_inflates_one(hello: Path, tmp_path: Path) -> None:
    with mounted(hello, tmp_path / "mnt") as m:
        listing = run(["ls", "-lR", m.mountpoint])
        found = run(["find", m.mountpoint, "-type", "f"])
        after_listing = stats(m.mountpoint)
        cat = run(["cat", m.mountpoint / "rom" / "skills" / "hello-acx" / "SKILL.md"])
        after_cat = stats(m.mountpoint)
    assert listing.returncode == 0 and found.returncode == 0
    assert "SKILL.md" in listing.stdout and len(found.stdout.splitlines()) == 3
    assert after_listing["blobs_inflated"] == 0
    assert after_listing["bytes_verified"] == 0
    assert cat.stdout == (HELLO / "SKILL.md").read_text(encoding="utf-8")
    assert after_cat["blobs_inflated"] == 1
    assert after_cat["bytes_verified"] == len((HELLO / "SKILL.md").read_bytes())


# --- an unprivileged user ----------------------------------------------------------------------

USER = "acxfs-test"


# The tests run as the user below change what every process on the machine sees for a while
# (/dev/fuse's mode, the search bit of the interpreter's directories, the user itself): they
# share one pytest-xdist worker, so that none undoes another's change under it.
MACHINE_WIDE = pytest.mark.xdist_group("machine-wide")


@pytest.fixture
def unprivileged_user() -> pwd.struct_passwd:
    """The user `acxfs-test` (created when absent); needs root."""
    if os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("the unprivileged-user mount test needs root to create its user")
        pytest.skip("creating the unprivileged test user needs root")
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        done = run(["useradd", "--create-home", "--shell", "/bin/sh", USER])
        assert done.returncode == 0, done.stderr
    return pwd.getpwnam(USER)


@contextlib.contextmanager
def traversable_by_others(paths: list[Path]) -> Iterator[list[str]]:
    """Add the search (o+x) bit to the ancestors of `paths` that lack it, restoring them after.

    The interpreter that runs `acxfs` may live under /root (pyenv), which is 0700; a normal
    user's own Python would not. Only the search bit is added, only for the test's duration."""
    changed: list[tuple[Path, int]] = []
    try:
        for path in paths:
            for directory in reversed(Path(os.path.realpath(path)).parents):
                mode = directory.stat().st_mode
                if not mode & stat.S_IXOTH and directory not in {d for d, _ in changed}:
                    os.chmod(directory, stat.S_IMODE(mode) | stat.S_IXOTH)
                    changed.append((directory, stat.S_IMODE(mode)))
        yield [str(d) for d, _ in changed]
    finally:
        for directory, mode in reversed(changed):
            os.chmod(directory, mode)


@contextlib.contextmanager
def dev_fuse_mode(mode: int) -> Iterator[None]:
    """/dev/fuse with `mode` for the test's duration, restored after.

    libfuse2 opens /dev/fuse in the calling process before it falls back to fusermount, so a
    normal user needs it crw-rw-rw-: udev's default rule sets that on every distribution, but a
    machine without udev keeps the kernel's crw-------."""
    old = stat.S_IMODE(os.stat("/dev/fuse").st_mode)
    os.chmod("/dev/fuse", mode)
    try:
        yield
    finally:
        os.chmod("/dev/fuse", old)


@pytest.fixture
def user_workdir(unprivileged_user: pwd.struct_passwd) -> Iterator[Path]:
    """A directory the test user owns, outside root's private pytest tree."""
    path = Path(tempfile.mkdtemp(prefix="acxfs-user-"))
    os.chown(path, unprivileged_user.pw_uid, unprivileged_user.pw_gid)
    try:
        yield path
    finally:
        left = acxfs_mounts_under(path)
        for mountpoint in left:
            force_cleanup(mountpoint)
        shutil.rmtree(path, ignore_errors=True)
        assert not left, f"mounts left behind by the test user: {left}"


def _chown_tree(root: Path, user: pwd.struct_passwd) -> None:
    for path in [root, *root.rglob("*")]:
        os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)


def run_as_user(user: pwd.struct_passwd, workdir: Path, commands: str,
                ) -> subprocess.CompletedProcess[str]:
    """`su USER -s /bin/sh -c SCRIPT` with acxfs's state in `workdir` (which the user owns) and
    the installed `acxfs` console script as $ACXFS, run by its absolute path."""
    import fuse
    import nacl
    import yaml

    import acxfs as package

    for sub in ("home", "state", "config", "cache"):
        (workdir / sub).mkdir(exist_ok=True)
    command = acxfs_command()[0]
    script = workdir / "run.sh"
    script.write_text(f"""
export HOME={workdir}/home ACXFS_TRUST_DIR={workdir}/trust XDG_STATE_HOME={workdir}/state
export XDG_CONFIG_HOME={workdir}/config XDG_CACHE_HOME={workdir}/cache
export PATH=/usr/local/bin:/usr/bin:/bin ACXFS="{command}"
unset PYTHONPATH PYTHONHOME
echo "@@id $(id -u)"
{commands}
""", encoding="utf-8")
    _chown_tree(workdir, user)
    # The interpreter may live under /root (pyenv), which is 0700; a normal user's own Python
    # would not. Only the search bit is added to such directories, for this command only.
    needed = [Path(sys.executable), Path(sys.prefix), Path(sys.base_prefix), Path(command),
              *(Path(m.__file__ or "") for m in (package, fuse, nacl, yaml))]
    with traversable_by_others(needed):
        return subprocess.run(["su", USER, "-s", "/bin/sh", "-c", f"/bin/sh {script}"],
                              capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL, check=False)


@MACHINE_WIDE
def test_unprivileged_user_mounts_reads_and_unmounts(
    packed: Path, unprivileged_user: pwd.struct_passwd, user_workdir: Path
) -> None:
    user = unprivileged_user
    container = Path(shutil.copy(packed / "hello.acx", user_workdir / "hello.acx"))
    shutil.copytree(packed / "trust", user_workdir / "trust")
    mountpoint = user_workdir / "skills" / "hello-acx"
    with dev_fuse_mode(0o666):
        done = run_as_user(user, user_workdir, f"""
"$ACXFS" mount "{container}" "{mountpoint}" &&
echo @@mounts && grep " {mountpoint} " /proc/mounts &&
echo @@ls && ls -la "{mountpoint}" &&
echo @@cat && cat "{mountpoint}/SKILL.md" &&
echo @@trust && getfattr -n user.acx.trust --only-values "{mountpoint}" && echo &&
echo @@umount && "$ACXFS" umount "{mountpoint}"
""")
    sections = dict(re.findall(r"^@@(\w+)\n?(.*?)(?=^@@|\Z)", done.stdout, re.S | re.M))
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert done.stdout.startswith(f"@@id {user.pw_uid}\n")
    assert f"user_id={user.pw_uid}" in sections["mounts"]
    assert "fuse.acxfs" in sections["mounts"]
    assert re.search(r"^-r--r--r-- .* SKILL\.md$", sections["ls"], re.M)
    assert sections["cat"] == (HELLO / "SKILL.md").read_text(encoding="utf-8")
    assert sections["trust"].strip() == "local"
    assert sections["umount"].strip() == f"unmounted {mountpoint}"
    found = re.search(r"\bpid (\d+)\b", done.stderr)
    assert found, done.stderr
    assert not mount_rows(mountpoint)
    assert wait_for(lambda: not pid_alive(int(found.group(1))), 10)
    assert not mountpoint.exists()


@MACHINE_WIDE
def test_unprivileged_user_cannot_unmount_roots_mount_and_is_told_why(
    hello: Path, tmp_path: Path, unprivileged_user: pwd.struct_passwd, user_workdir: Path
) -> None:
    outside = Path(tempfile.mkdtemp(prefix="acxfs-root-"))  # the user can reach it
    outside.chmod(0o755)
    try:
        with mounted(hello, outside / "roots") as m:
            done = run_as_user(unprivileged_user, user_workdir,
                               f'"$ACXFS" umount "{m.mountpoint}"')
            assert done.returncode == 2
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1 and "mounted by another user (uid 0)" in lines[0], lines
            assert os.path.ismount(m.mountpoint)
    finally:
        shutil.rmtree(outside, ignore_errors=True)


@MACHINE_WIDE
def test_unprivileged_user_without_dev_fuse_access_gets_one_clear_line(
    packed: Path, unprivileged_user: pwd.struct_passwd, user_workdir: Path
) -> None:
    container = Path(shutil.copy(packed / "hello.acx", user_workdir / "hello.acx"))
    shutil.copytree(packed / "trust", user_workdir / "trust")
    mountpoint = user_workdir / "mnt"
    with dev_fuse_mode(0o600):
        done = run_as_user(unprivileged_user, user_workdir,
                           f'"$ACXFS" mount "{container}" "{mountpoint}"')
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "acxfs: error: /dev/fuse is not readable and writable by this user; FUSE needs it "
        "crw-rw-rw- (udev's default rule for fuse)"]
    assert not mountpoint.exists()
    assert_nothing_left(mountpoint, container)
