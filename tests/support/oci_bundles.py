"""Signed bundles and the real `acxfs` command for the OCI tests: a cartridge packed by the real
`acxfs pack` with the test's local key, the real azphalt package trusted by `acxfs trust add`,
the manifest the issue prescribes for each, computed here from the file's own bytes and rows
(sqlite3, zipfile), never from acxfs's modules, and the one-line refusal every failure must be.

Invariant: nothing here imports acxfs; every command runs as the real console script in the
test's isolated HOME with the environment it is given on top of the test's own.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import sqlite3
import subprocess
import zipfile
from pathlib import Path

from scripts.mounting import acxfs
from tests.support.bundles import pack
from tests.support.demo import PUBLISHER

FIXTURES = Path(__file__).parent.parent / "fixtures"
AZP = FIXTURES / "azp" / "com.hereliesaz.azphalt.dev-workflow-skills-1.0.0.azp"
AZP_ID = "com.hereliesaz.azphalt.dev-workflow-skills"
ARTIFACT = "foo"
IDENTITY = f"{PUBLISHER}/{ARTIFACT}"
SKILLS = ("beta", "alpha")
EMPTY_DIGEST = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
DSSE = "application/vnd.dsse.envelope.v1+json"


def run(*args: object, env: dict[str, str] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The real `acxfs ARGS` with `env` over the test's environment."""
    return acxfs(*args, env={**os.environ, **(env or {})}, timeout=timeout)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (result.args, result.stdout, result.stderr)
    return result.stdout


def refused(result: subprocess.CompletedProcess[str], code: int, line: str) -> None:
    """The command failed with exit `code` and exactly one line: `acxfs: error: LINE`."""
    assert (result.returncode, result.stderr, result.stdout) == (
        code, f"acxfs: error: {line}\n", ""), (result.args, result.stdout, result.stderr)


def cartridge(tmp_path: Path, version: str = "1.1.0", artifact: str = ARTIFACT) -> Path:
    """A cartridge PUBLISHER/artifact at `version` with two skills, packed by the real
    command with the test's local key (the `local_key` fixture)."""
    return pack(tmp_path, PUBLISHER, artifact, version, *SKILLS)


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def canonical(doc: dict[str, object]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def envelope_of(path: Path) -> bytes:
    """The DSSE envelope in the cartridge's `signatures` table, as stored."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        rows = con.execute("SELECT envelope FROM signatures").fetchall()
    assert len(rows) == 1, rows
    return str(rows[0][0]).encode("utf-8")


def _manifest(artifact_type: str, layer_type: str, data: bytes, title: str,
              layer_notes: dict[str, str], notes: dict[str, str | None]) -> bytes:
    return canonical({
        "schemaVersion": 2, "mediaType": MANIFEST, "artifactType": artifact_type,
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": EMPTY_DIGEST,
                   "size": 2, "data": "e30="},
        "layers": [{"mediaType": layer_type, "digest": sha256(data), "size": len(data),
                    "annotations": {"org.opencontainers.image.title": title, **layer_notes}}],
        "annotations": {k: v for k, v in notes.items() if v},
    })


def acx_manifest(path: Path, version: str = "1.1.0") -> bytes:
    """The manifest the issue prescribes for a cartridge, from its rows."""
    data = path.read_bytes()
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        meta = dict(con.execute("SELECT key, value FROM cartridge").fetchall())
        envelope = json.loads(con.execute("SELECT envelope FROM signatures").fetchone()[0])
    statement = json.loads(_b64(envelope["payload"]))
    rom = "sha256:" + statement["subject"][0]["digest"]["sha256"]
    image, skill = "org.opencontainers.image.", "org.agent.skill."
    description = meta.get("acx.description")
    return _manifest(
        "application/vnd.acx.cartridge.v1", "application/vnd.acx.cartridge.layer.v1+sqlite",
        data, f"{ARTIFACT}-{version}.acx",
        {"vnd.acx.rom-manifest-hash": rom, "vnd.acx.spec-version": meta["acx.spec_version"]},
        {image + "title": IDENTITY, image + "version": version,
         image + "created": meta.get("acx.created_at"), image + "description": description,
         image + "licenses": meta.get("acx.license"), image + "vendor": PUBLISHER,
         skill + "name": ",".join(sorted(SKILLS)), skill + "version": version,
         skill + "description": description, skill + "license": meta.get("acx.license")})


def azp_manifest(path: Path = AZP) -> bytes:
    """The manifest the issue prescribes for an azphalt package, from its manifest.json."""
    data = path.read_bytes()
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        doc = json.loads(z.read("manifest.json"))
    names = sorted(s["id"] for s in doc["skill"]["skills"])
    image, skill = "org.opencontainers.image.", "org.agent.skill."
    kind = "application/vnd.azphalt.package"
    return _manifest(
        kind, kind, data, f"{doc['id']}-{doc['version']}.azp", {},
        {image + "title": doc["id"], image + "version": doc["version"],
         image + "created": doc.get("created"), image + "description": doc.get("description"),
         image + "licenses": doc.get("license"), image + "vendor": doc.get("publisher"),
         skill + "name": ",".join(names), skill + "version": doc["version"],
         skill + "description": doc.get("description"), skill + "license": doc.get("license")})


def _b64(text: str) -> bytes:
    return base64.b64decode(text)


def verdict_line(path: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    """What `acxfs verify` says of `path`: its exit code and verdict line."""
    result = run("verify", path, env=env)
    return result.returncode, result.stdout.splitlines()[0]
