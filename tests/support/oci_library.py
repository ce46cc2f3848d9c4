"""The skills library installing from an OCI registry, as its tests see it: bundles published
with the real `acxfs push`, manifests planted beside them with the raw client, and what a
library holds (its state file, its store, its links) to prove a refusal changed nothing.

Invariant: every helper works only in the `Machine` and the `Registry` it is given; planting
goes through `oci_client.Client` (never acxfs), so a manifest acxfs would never write reaches
the registry exactly as built here.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support import oci_client as oc
from tests.support.oci_client import OCI_MANIFEST, Client
from tests.support.oci_fake import FakeRegistry
from tests.support.projects import Machine, one_line_error


@dataclass
class OciMachine(Machine):
    """A `Machine` whose commands also get `extra` (the registry's CA, a DOCKER_CONFIG)."""

    extra: dict[str, str] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        return {**super().env, **self.extra}


PUSHED = re.compile(r"^(oci(?:\+http)?://\S+)@(sha256:[0-9a-f]{64}) (\S+) (\S+)$")


@dataclass(frozen=True)
class Pushed:
    """What `acxfs push` printed: `REPO@sha256:M IDENTITY VERSION`."""

    repo: str
    manifest: str
    identity: str
    version: str


def push(machine: Machine, bundle: Path, ref: str) -> Pushed:
    """`acxfs push BUNDLE REF` by `machine`; what it printed."""
    out = machine.ok("push", bundle, ref).strip().splitlines()[-1]
    found = PUSHED.match(out)
    assert found, out
    return Pushed(*found.groups())


def manifest_doc(client: Client, repo: str, ref: str) -> dict[str, object]:
    doc = json.loads(client.get_manifest(repo, ref, accept=OCI_MANIFEST))
    assert isinstance(doc, dict)
    return doc


def plant(client: Client, repo: str, tag: str, doc: dict[str, object]) -> str:
    """PUT `doc` (any JSON) as the manifest `repo:tag`; its digest."""
    return client.put_manifest(repo, tag, json.dumps(doc).encode())


def retag(client: Client, repo: str, source: str, tag: str) -> str:
    """Point `tag` at exactly the manifest bytes `source` names; their digest."""
    return client.put_manifest(repo, tag, client.get_manifest(repo, source, accept=OCI_MANIFEST))


def _tree(root: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    if not root.exists():
        return found
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames + [d for d in dirnames if Path(dirpath, d).is_symlink()]):
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            found[rel] = (f"-> {os.readlink(path)}" if path.is_symlink()
                          else hashlib.sha256(path.read_bytes()).hexdigest())
    return found


def holdings(machine: Machine) -> dict[str, object]:
    """What a refusal must leave as it was: the state file's bytes, the store's files, the
    agents' skill directories."""
    data = machine.home / ".local" / "share" / "acxfs"
    state = data / "library.json"
    return {"library.json": state.read_bytes() if state.exists() else None,
            "store": _tree(data / "store"),
            "links": {agent: _tree(machine.home / agent / "skills")
                      for agent in (".agents", ".claude")}}


def link_targets(machine: Machine) -> dict[str, str]:
    """Each agent skill entry in HOME (relative path) -> its link target."""
    found: dict[str, str] = {}
    for agent in (".agents", ".claude"):
        skills = machine.home / agent / "skills"
        if skills.is_dir():
            for entry in sorted(skills.iterdir()):
                found[str(entry.relative_to(machine.home))] = (
                    os.readlink(entry) if entry.is_symlink() else "not a link")
    return found


@contextlib.contextmanager
def oci_machines(tmp_path: Path, *names: str,
                 extra: dict[str, str] | None = None) -> Iterator[list[OciMachine]]:
    """Machines under tmp_path (each with `extra` in its environment), each library stopped
    at the end; fails the test if a mount outlives it."""
    made = [OciMachine(tmp_path / name, dict(extra or {})) for name in names]
    for machine in made:
        machine.make()
    try:
        yield made
    finally:
        left = [m for machine in made for m in machine.stop()]
        assert not left, f"library mounts left behind: {left}"


def refused(machine: Machine, *args: object, code: int = 1) -> str:
    """Run a command `machine` must refuse in one line (exit `code`), its library, store and
    links left exactly as they were; the message after `acxfs: error: `."""
    before = holdings(machine)
    message = one_line_error(machine.acxfs(*args), code)
    assert holdings(machine) == before
    return message.removeprefix("acxfs: error: ")


def fake_with(cart: Path, repo: str, tag: str) -> FakeRegistry:
    """A plain-HTTP fake serving `cart` as an acxfs artifact `repo:tag` (its request log is
    what the tests read)."""
    fake = FakeRegistry()
    fake.add_blob(b"{}")
    data = cart.read_bytes()
    fake.add_blob(data)
    fake.add_manifest(repo, oc.image_manifest(
        [oc.descriptor("application/vnd.acx.cartridge.layer.v1+sqlite", data)],
        artifact_type="application/vnd.acx.cartridge.v1"), tag=tag)
    return fake
