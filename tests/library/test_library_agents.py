"""Real agents see the skills library: what `acxfs add`, `update`, `revert` and `remove` do is
what Claude Code and Codex list, through the links, offline.

Every test runs the real `acxfs` command in the isolated HOME of conftest, and the pinned
agents of ``tests.support.agents`` (loopback-only namespace, mocked model API). Descriptions are
compared with the SKILL.md frontmatter read through the agent's own link, so a listed line
proves the agent read verified bytes from the library daemon; each positive check has a
negative control in the same run (a bundle packed but never added, or the old description).
The library daemon is stopped at every teardown, and a mount left behind fails the test.
Under ``CI=true`` a missing agent fails (``require`` of ``tests.support.agent_setup``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import select
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from scripts.mounting import acxfs
from tests.conftest import Bulk
from tests.support import FIXTURES, REPO, agents
from tests.support.agent_setup import require, write_skill
from tests.support.library import (
    agent_dirs,
    data_dir,
    frontmatter,
    home,
    linked_description,
    listing,
    ok,
    pack,
)

pytestmark = [pytest.mark.fuse, pytest.mark.slow, pytest.mark.usefixtures("library_stops")]

REAL = FIXTURES / "real"
AZP = FIXTURES / "azp" / "com.hereliesaz.azphalt.dev-workflow-skills-1.0.0.azp"
HELLO = REPO / "examples" / "hello-acx"
PUBLISHER = "io.github.example"
REAL_SKILLS = {"expertise-security-expert", "expertise-devops-engineer", "expertise-designer"}
AZP_SKILLS = {"api-contract-design", "changelog-writer", "conventional-commits",
              "incident-postmortem", "sql-query-optimizer", "tdd-workflow"}
LIBRARY_SKILLS = REAL_SKILLS | AZP_SKILLS | {"hello-acx"}
ABSENT = "acxfs-probe-not-added"  # packed, trusted, never added: no agent may list it
BULK = 200
FD_BOUND = BULK + 64 + 32  # one per bundle at most, plus the process's own, plus slack
POLL_WAIT = 4.5  # seconds: two of Claude Code's 2 s stat polls of its skill directories


LAYOUTS = ["links", "whole"]  # `acxfs layout`: a link per skill, or each directory one link


@pytest.fixture(params=LAYOUTS)
def library(request: pytest.FixtureRequest, tmp_path: Path, local_key: None) -> set[str]:
    """The three real cartridges, the real six-skill .azp and the packed demo, each trusted
    and then added in one `acxfs add` (after `acxfs layout whole` in the whole layout); a
    fourth cartridge (ABSENT) packed but not added. Returns the names of the skills added."""
    if request.param == "whole":
        ok(acxfs("layout", "whole"))
    for cart, publisher in (("rex-calder-1.0.0.acx", "io.github.calder-sec"),
                            ("ada-ridge-1.0.0.acx", "io.github.ridgeworks"),
                            ("scenario-research-designer.acx", "io.github.agentibus")):
        ok(acxfs("trust", "add", REAL / cart, "--publisher", publisher))
    ok(acxfs("trust", "add", AZP))
    hello = pack(HELLO, tmp_path / "hello-acx.acx")
    pack(write_skill(tmp_path / "src", ABSENT, "Never added; must not be listed."),
         tmp_path / f"{ABSENT}.acx")
    ok(acxfs("add", REAL / "rex-calder-1.0.0.acx", REAL / "ada-ridge-1.0.0.acx",
             REAL / "scenario-research-designer.acx", AZP, hello))
    added = {s for b in listing()["bundles"] for s in b["skills"]}
    assert added == LIBRARY_SKILLS
    for agent_dir in agent_dirs():
        assert not (agent_dir / ABSENT).exists()
    return added


# --- 1, 2: both agents list the whole library ---------------------------------------------------


def test_claude_lists_every_added_skill_with_the_description_its_link_serves(
    library: set[str], project: Path
) -> None:
    require("claude")
    listed = agents.claude_skills(home(), project)
    claude_dir = home() / ".claude" / "skills"
    for name in sorted(library):
        assert (name, linked_description(claude_dir, name)) in listed, name
    assert ABSENT not in {name for name, _ in listed}
    hello = frontmatter((HELLO / "SKILL.md").read_text(encoding="utf-8"))["description"]
    assert ("hello-acx", hello) in listed  # the served bytes are the source's


def test_codex_lists_every_added_skill_from_the_cross_agent_links(
    library: set[str], project: Path
) -> None:
    require("codex")
    body = agents.codex_first_request(home(), project).body
    listed = agents.codex_skills_in(body)
    files = agents.codex_skill_files(body)
    cross = home() / ".agents" / "skills"
    for name in sorted(library):
        assert (name, linked_description(cross, name)) in listed, name
        # Codex names a skill by the real path of its skills directory: served whole, the
        # directory's view in the mount.
        real = os.path.realpath(cross) if cross.is_symlink() else cross
        assert files[name] == str(Path(real) / name / "SKILL.md")
    assert ABSENT not in {name for name, _ in listed}
    told = {name: Path(files[name]).read_bytes() for name in library}
    ok(acxfs("add", pack(write_skill(project / "src", "later-skill", "Added after."),
                         project / "later.acx")))
    # Whatever the agent was told to read still reads the same verified bytes after a
    # change (served whole, the directory now links to another view; the old one is
    # served on), and the skills directory shows the new skill.
    assert {name: Path(files[name]).read_bytes() for name in library} == told
    assert (cross / "later-skill" / "SKILL.md").is_file()


# --- 3: 200 bundles, one daemon ---------------------------------------------------------------


def fuse_holders(of_home: Path) -> list[int]:
    """Every process whose HOME is ``of_home`` and that has /dev/fuse open."""
    wanted = b"HOME=" + os.fsencode(of_home)
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            if wanted not in environ:
                continue
            fds = os.listdir(f"/proc/{entry}/fd")
            if any(os.readlink(f"/proc/{entry}/fd/{fd}") == "/dev/fuse" for fd in fds):
                found.append(int(entry))
        except OSError:
            continue  # gone, or not ours to read
    return found


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.mark.xdist_group("two-hundred-bundles")
def test_two_hundred_bundles_are_served_by_one_daemon_with_bounded_descriptors(
    local_key: None, two_hundred_bundles: Bulk, capsys: pytest.CaptureFixture[str]
) -> None:
    carts, sources = two_hundred_bundles
    names = sorted(sources)
    assert len(names) == BULK
    started = time.monotonic()
    ok(acxfs("add", *carts, timeout=120))
    add_seconds = time.monotonic() - started
    doc = listing()
    daemon = doc["daemon"]
    assert isinstance(daemon, dict) and isinstance(daemon["pid"], int)
    pid = daemon["pid"]
    bundles = doc["bundles"]
    assert len(bundles) == BULK and all(b["served"] for b in bundles)
    assert sorted(s for b in bundles for s in b["skills"]) == names
    assert fuse_holders(home()) == [pid]  # one daemon holds the one FUSE connection
    after_add = open_descriptors(pid)
    mnt = (data_dir() / "mnt").resolve()

    def read_through(link: Path) -> tuple[Path, bytes]:
        return Path(os.path.realpath(link)), (link / "SKILL.md").read_bytes()

    links = [agent_dir / name for name in names for agent_dir in agent_dirs()]
    assert all(link.is_symlink() for link in links)
    with ThreadPoolExecutor(8) as pool:
        read = list(pool.map(read_through, links))
    for link, (target, data) in zip(links, read, strict=True):
        assert target.is_relative_to(mnt), (link, target)
        assert data == sources[link.name], link
    after_reads = open_descriptors(pid)
    assert fuse_holders(home()) == [pid]
    with capsys.disabled():
        print(f"\n[{BULK} bundles] add {add_seconds:.1f} s; daemon {pid}: "
              f"{after_add} fds after add, {after_reads} after reading {len(links)} "
              f"SKILL.md (bound {FD_BOUND})")
    assert after_add < FD_BOUND and after_reads < FD_BOUND, (after_add, after_reads)


# --- 4: every change is an inotify event in the agent's directory --------------------------------

IN_MODIFY, IN_ATTRIB = 0x002, 0x004
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x040, 0x080, 0x100, 0x200
IN_NONBLOCK, IN_CLOEXEC = 0o4000, 0o2000000
_EVENT = struct.Struct("iIII")


@dataclass(frozen=True)
class Event:
    mask: int
    name: str


class Inotify:
    """A Linux inotify watch on one directory, through libc (ctypes)."""

    def __init__(self, directory: Path) -> None:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.fd = int(libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC))
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        mask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_MODIFY
        if libc.inotify_add_watch(self.fd, os.fsencode(directory), mask) < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {directory}")

    def events(self, timeout: float = 1.0) -> list[Event]:
        """Every event queued now (waiting up to ``timeout`` for the first)."""
        got: list[Event] = []
        ready, _, _ = select.select([self.fd], [], [], timeout)
        while ready:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            at = 0
            while at < len(data):
                _, mask, _, size = _EVENT.unpack_from(data, at)
                raw = data[at + _EVENT.size: at + _EVENT.size + size]
                got.append(Event(mask, os.fsdecode(raw.rstrip(b"\0"))))
                at += _EVENT.size + size
        return got

    def close(self) -> None:
        os.close(self.fd)


def test_add_update_revert_and_remove_are_inotify_events_in_claudes_skill_directory(
    tmp_path: Path, local_key: None
) -> None:
    name = "watched-skill"
    v1 = pack(write_skill(tmp_path / "v1", name, "Watched, first."), tmp_path / "v1.acx")
    v2 = pack(write_skill(tmp_path / "v2", name, "Watched, second."), tmp_path / "v2.acx",
              version="1.1.0")
    skills = home() / ".claude" / "skills"
    skills.mkdir(parents=True)
    watch = Inotify(skills)
    try:
        seen: dict[str, list[Event]] = {}
        targets: dict[str, str] = {}
        left: dict[str, list[str]] = {}
        for step, argv in (("add", ["add", v1]), ("update", ["update", v2]),
                           ("revert", ["revert", name]), ("remove", ["remove", name])):
            assert watch.events(timeout=0) == []  # nothing but the commands changes it
            ok(acxfs(*argv))
            seen[step] = [e for e in watch.events() if e.name == name]
            left[step] = sorted(os.listdir(skills))  # no temporary link stays behind
            targets[step] = os.readlink(skills / name) if step != "remove" else ""
    finally:
        watch.close()
    # add creates the link; update and revert rename a new link over it (an exchange with a
    # temporary one, then deleted); remove renames it away (then deletes it under a temporary
    # name). A watcher of the directory sees the skill's own name in each.
    assert any(e.mask & IN_CREATE for e in seen["add"]), seen
    assert any(e.mask & IN_MOVED_TO for e in seen["update"]), seen
    assert any(e.mask & IN_MOVED_TO for e in seen["revert"]), seen
    assert any(e.mask & (IN_MOVED_FROM | IN_DELETE) for e in seen["remove"]), seen
    assert left == {"add": [name], "update": [name], "revert": [name], "remove": []}
    assert targets["add"] != targets["update"] and targets["revert"] == targets["add"]
    assert not (skills / name).exists() and not (skills / name).is_symlink()


# --- 5: a running Claude Code across an update --------------------------------------------------


def run_across(project: Path, *changes: list[object]) -> tuple[
        list[list[tuple[str, str]]], list[list[tuple[str, str]]], list[tuple[str, str]]]:
    """A `claude -p` kept running by a held tool call while the `acxfs` commands ``changes``
    run; returns the skill lists of its first and second requests and the skills of a new
    `claude` afterwards."""
    (project / "note.txt").write_text("kept alive\n", encoding="utf-8")
    release = threading.Event()
    first_turn = agents.Reply(tool=("Read", {"file_path": str(project / "note.txt")}),
                              hold=release)
    with agents.AnthropicMock([first_turn, agents.Reply(text="done")]) as mock:
        run = agents.start_claude(home(), project, mock, timeout=50)
        first = mock.wait_for(1, timeout=40)
        for argv in changes:
            ok(acxfs(*argv))
        time.sleep(POLL_WAIT)
        still_running = run.process.poll() is None
        release.set()
        second = mock.wait_for(2, timeout=40)
        code = run.wait()
    assert code == 0 and still_running, run.describe()
    later = agents.claude_skills(home(), project)
    return (agents.claude_skill_lists(first.body), agents.claude_skill_lists(second.body),
            later)


def ours(lists: list[list[tuple[str, str]]]) -> list[list[tuple[str, str]]]:
    """Each list with only this test's skills (the built-in ones dropped), sorted."""
    return [sorted(e for e in one if e[0].endswith("-skill")) for one in lists]


OLD = "Live skill, the first release of it."
NEW = "Live skill, the second release here."  # the same length: SKILL.md keeps its size
EPOCH, DAY = 1_700_000_000, 86400


def release(tmp_path: Path, name: str, description: str, version: str = "1.0.0",
            epoch: int = EPOCH) -> Path:
    src = tmp_path / f"src-{name}-{version}"
    return pack(write_skill(src, name, description), tmp_path / f"{name}-{version}.acx",
                version=version, epoch=epoch)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_running_claude_is_sent_the_skills_added_or_changed_but_not_told_of_a_removal(
    tmp_path: Path, project: Path, local_key: None, layout: str
) -> None:
    require("claude")
    if layout == "whole":
        ok(acxfs("layout", "whole"))
    ok(acxfs("add", release(tmp_path, "live-skill", OLD),
             release(tmp_path, "kept-skill", "Kept, never changed."),
             release(tmp_path, "gone-skill", "Removed while Claude runs.")))
    v2 = release(tmp_path, "live-skill", NEW, "1.1.0", EPOCH + DAY)  # a day later: new mtime
    fresh = release(tmp_path, "fresh-skill", "Added while Claude runs.")
    first, second, later = run_across(project, ["update", v2], ["add", fresh],
                                      ["remove", "gone-skill"])
    at_start = [("gone-skill", "Removed while Claude runs."),
                ("kept-skill", "Kept, never changed."), ("live-skill", OLD)]
    assert ours(first) == [at_start]
    # The conversation so far (the list it started with), then one new system message with
    # only the skills added or changed since: nothing says the removed one is gone.
    assert ours(second) == [at_start, [("fresh-skill", "Added while Claude runs."),
                                       ("live-skill", NEW)]]
    assert len(second) == 2 and len(second[1]) == 2  # no built-in skill re-sent either
    assert ours([later]) == [[("fresh-skill", "Added while Claude runs."),
                              ("kept-skill", "Kept, never changed."), ("live-skill", NEW)]]
    assert linked_description(home() / ".claude" / "skills", "live-skill") == NEW


def test_a_running_claude_notices_an_update_even_with_the_same_skill_md_size_and_mtime(
    tmp_path: Path, project: Path, local_key: None
) -> None:
    # Claude Code polls its skill directories with stat every 2 s and reloads a skill when
    # its SKILL.md's mtime or size changed. A reproducible build (one SOURCE_DATE_EPOCH) of a
    # description of the same length keeps both, so the library shows every file of a
    # revision no older than its install: the update is noticed all the same.
    require("claude")
    name = "live-skill"
    ok(acxfs("add", release(tmp_path, name, OLD)))
    v2 = release(tmp_path, name, NEW, "1.1.0")  # the same SOURCE_DATE_EPOCH, the same size
    link = home() / ".claude" / "skills" / name
    before = os.stat(link / "SKILL.md")
    first, second, later = run_across(project, ["update", v2])
    after = os.stat(link / "SKILL.md")
    assert before.st_size == after.st_size
    assert after.st_mtime_ns > before.st_mtime_ns  # the install time of the new revision
    assert linked_description(home() / ".claude" / "skills", name) == NEW
    assert ours(first) == [[(name, OLD)]]
    assert ours(second) == [[(name, OLD)], [(name, NEW)]]  # told of the new description
    assert (name, NEW) in later


def test_inotify_helper_reports_a_link_made_in_its_directory(tmp_path: Path) -> None:
    watched = tmp_path / "watched"
    watched.mkdir()
    watch = Inotify(watched)
    try:
        assert watch.events(timeout=0) == []
        os.symlink("nowhere", watched / "made")
        os.rename(watched / "made", watched / "moved")
        os.unlink(watched / "moved")
        got = [(e.mask & (IN_CREATE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE), e.name)
               for e in watch.events()]
    finally:
        watch.close()
    assert got == [(IN_CREATE, "made"), (IN_MOVED_FROM, "made"), (IN_MOVED_TO, "moved"),
                   (IN_DELETE, "moved")]
    with pytest.raises(OSError) as caught:
        Inotify(tmp_path / "missing")
    assert caught.value.errno == errno.ENOENT
