"""The library commands load what their command line uses: `add` of a file, `list`, `remove`
and `up` with a daemon running load neither the daemon and the mount stack under it, nor the
sources' clients (the OCI client, the HTTP client), nor the projects; only `add`, which checks
the bundle, loads the formats and PyYAML; `status` loads no format and none of the mount stack.

Each command runs as the real `acxfs.cli.main` in a fresh interpreter, against a library whose
daemon is a stand-in answering on the library's control socket as the daemon does (the
command talks to the daemon only there, so what it loads is what it would load beside a real
one, and no mount is needed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from acxfs.library.serving.control import ControlServer, Op
from acxfs.library.store.served_names import served_name
from acxfs.paths import LibraryPaths, library_paths
from tests.support import REPO
from tests.support.demo import PUBLISHER
from tests.support.library import pack

SKILL = "hello"
IDENTITY = f"{PUBLISHER}/{SKILL}"

# What a library command never needs unless its command line asks for it.
MOUNT_STACK = ("acxfs.library.serving.daemon", "acxfs.mount.lifecycle", "acxfs.mount.backend",
               "acxfs.mount.lowlevel", "acxfs.mount.operations", "fuse", "mfusepy")
SOURCES = ("acxfs.sources.kinds", "acxfs.sources.oci.source", "acxfs.sources.oci.repository",
           "acxfs.sources.oci.login", "acxfs.sources.registry", "acxfs.sources.azphalt",
           "acxfs.library.updates.remote", "acxfs.library.updates.updates",
           "acxfs.library.projects.project", "acxfs.library.projects.lock_sources",
           "urllib.request", "http.client", "ssl")
CHECKING = ("acxfs.formats", "acxfs.library.repair", "sqlite3", "yaml")

LOADS = """\
import json, sys
from acxfs.cli import main
code = main(sys.argv[2:])
with open(sys.argv[1], "w", encoding="utf-8") as out:
    json.dump({"code": code, "modules": sorted(sys.modules)}, out)
"""


class StandInDaemon:
    """Answers on the library's control socket as the daemon does: each store file loaded is
    served at the name the library expects, and nothing is mounted."""

    def __init__(self, paths: LibraryPaths) -> None:
        self.paths = paths
        self.served: dict[str, str] = {}  # served name -> store file
        paths.control_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.server = ControlServer(paths.socket, self.answer)

    def answer(self, doc: dict[str, object]) -> dict[str, object]:
        if doc.get("op") == Op.LOAD:
            file = str(doc["file"])
            name = served_name(IDENTITY, "1.0.0", file.partition(".")[0])
            self.served[name] = file
            return {"ok": True, "path": str(self.paths.mnt / name)}
        if doc.get("op") == Op.PING:
            return {"ok": True, "pid": os.getpid()}
        if doc.get("op") == Op.SYNC:  # the library now says what is served
            state = json.loads(self.paths.state.read_text(encoding="utf-8"))
            files = {item["current"]["file"] for item in state["installed"].values()}
            self.served = {n: f for n, f in self.served.items() if f in files}
        return {"ok": True, "pid": os.getpid(), "mountpoint": str(self.paths.mnt),
                "served": dict(self.served), "refused": {}, "failures": []}


@pytest.fixture
def daemon() -> Iterator[StandInDaemon]:
    stand_in = StandInDaemon(library_paths())
    stand_in.server.start()
    try:
        yield stand_in
    finally:
        stand_in.server.close()


def loaded(*argv: object) -> set[str]:
    """The modules `acxfs ARGV...`, run in a fresh interpreter, had loaded when it returned
    (it must have succeeded)."""
    out = Path(os.environ["HOME"]) / "modules.json"
    done = subprocess.run([sys.executable, "-c", LOADS, str(out), *map(str, argv)],
                          capture_output=True, text=True, timeout=60, cwd=REPO,
                          stdin=subprocess.DEVNULL, check=False)
    assert out.exists(), done.stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    out.unlink()
    assert doc["code"] == 0, (argv, done.stdout, done.stderr)
    return set(doc["modules"])


def present(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return [name for name in names if name in modules]


def test_library_commands_leave_the_mount_layer_and_the_sources_unloaded(
        tmp_path: Path, local_key: None, daemon: StandInDaemon) -> None:
    skill = tmp_path / SKILL
    skill.mkdir()
    (skill / "SKILL.md").write_text(f"---\nname: {SKILL}\ndescription: Says hello.\n---\n\nHi.\n")
    bundle = pack(skill, tmp_path / "hello.acx")

    modules = loaded("add", bundle)
    assert present(modules, MOUNT_STACK + SOURCES) == []
    assert present(modules, ("acxfs.formats", "yaml")) == ["acxfs.formats", "yaml"]  # checked
    assert len(daemon.served) == 1  # what the library asked the daemon to serve
    for argv in (("list",), ("list", "--json"), ("up",), ("remove", IDENTITY)):
        modules = loaded(*argv)
        assert present(modules, MOUNT_STACK + SOURCES + CHECKING) == [], argv
    assert daemon.served == {}


def test_status_and_the_library_commands_help_load_no_format_and_no_mount_stack() -> None:
    for argv in (("status",), ("status", "--json"), ("add", "--help"), ("list", "--help"),
                 ("up", "--help"), ("remove", "--help"), ("update", "--help"),
                 ("sync", "--help")):
        modules = loaded(*argv)
        assert present(modules, MOUNT_STACK + SOURCES + CHECKING) == [], argv
