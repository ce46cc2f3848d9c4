"""The OCI manifests acxfs writes and accepts: one signed bundle as one layer, and the DSSE
envelope as a manifest referring to it.

Invariant: a manifest acxfs writes is a pure function of the bundle's bytes and signed facts,
serialised one way (`json.dumps(m, sort_keys=True, separators=(",", ":"))`), so a push of the
same file always names the same digest.  A manifest acxfs reads is accepted only in exactly
that form (an image manifest, an acxfs `artifactType`, the empty config descriptor, one layer
of the artifactType's media type with a sha256 digest and a size within bounds); its
annotations are labels for people and other tools: acxfs never reads them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass

from acxfs.errors import SourceError
from acxfs.safe import strict_json
from acxfs.sources.http import MIB
from acxfs.sources.oci.reference import DIGEST_RE

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
EMPTY = "application/vnd.oci.empty.v1+json"
EMPTY_BYTES = b"{}"
EMPTY_DIGEST = "sha256:" + hashlib.sha256(EMPTY_BYTES).hexdigest()
ACX_ARTIFACT = "application/vnd.acx.cartridge.v1"
ACX_LAYER = "application/vnd.acx.cartridge.layer.v1+sqlite"
AZP_ARTIFACT = "application/vnd.azphalt.package"
DSSE = "application/vnd.dsse.envelope.v1+json"
MANIFEST_BYTES = 4 * MIB
LAYER_BYTES = 1024 * MIB
JSON_DEPTH = 32  # the deepest nesting of a registry's JSON acxfs reads
TYPES = {"acx": (ACX_ARTIFACT, ACX_LAYER), "azp": (AZP_ARTIFACT, AZP_ARTIFACT)}
EMPTY_DESCRIPTOR: dict[str, object] = {"mediaType": EMPTY, "digest": EMPTY_DIGEST, "size": 2,
                                       "data": "e30="}


def canonical(doc: dict[str, object]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Labels:
    """The signed facts a pushed manifest is annotated with (None: not signed, omitted)."""

    name: str  # the identity
    artifact: str  # the id in the file name the layer is titled with
    version: str
    skills: tuple[str, ...]
    created: str | None = None
    description: str | None = None
    license: str | None = None
    publisher: str | None = None
    rom_manifest: str | None = None  # a cartridge's signed ROM manifest hash
    spec_version: str | None = None  # the ACX spec version a cartridge declares


def _present(pairs: Iterable[tuple[str, str | None]]) -> dict[str, str]:
    return {k: v for k, v in pairs if v}


def bundle_manifest(fmt: str, layer_digest: str, size: int, labels: Labels) -> bytes:
    """The image manifest of one bundle file (its bytes are the one layer)."""
    artifact_type, layer_type = TYPES[fmt]
    layer_notes = _present([
        ("org.opencontainers.image.title", f"{labels.artifact}-{labels.version}.{fmt}"),
        ("vnd.acx.rom-manifest-hash", labels.rom_manifest),
        ("vnd.acx.spec-version", labels.spec_version)])
    image = "org.opencontainers.image."
    skill = "org.agent.skill."
    notes = _present([
        (image + "title", labels.name), (image + "version", labels.version),
        (image + "created", labels.created), (image + "description", labels.description),
        (image + "licenses", labels.license), (image + "vendor", labels.publisher),
        (skill + "name", ",".join(sorted(labels.skills))), (skill + "version", labels.version),
        (skill + "description", labels.description), (skill + "license", labels.license)])
    return canonical({
        "schemaVersion": 2, "mediaType": MANIFEST, "artifactType": artifact_type,
        "config": EMPTY_DESCRIPTOR,
        "layers": [{"mediaType": layer_type, "digest": layer_digest, "size": size,
                    "annotations": layer_notes}],
        "annotations": notes,
    })


def referrer_manifest(envelope_digest: str, envelope_size: int, subject: str,
                      subject_size: int) -> bytes:
    """The manifest that attaches a cartridge's DSSE envelope to the cartridge's manifest."""
    return canonical({
        "schemaVersion": 2, "mediaType": MANIFEST, "artifactType": DSSE,
        "config": EMPTY_DESCRIPTOR,
        "layers": [{"mediaType": DSSE, "digest": envelope_digest, "size": envelope_size}],
        "subject": {"mediaType": MANIFEST, "digest": subject, "size": subject_size},
    })


def with_referrer(index: bytes | None, referrer: str, size: int, where: str) -> bytes | None:
    """The fallback tag's index with `referrer` added (None: it lists it already).  Every
    descriptor it held is kept as it was."""
    manifests: list[object] = []
    doc: dict[str, object] = {"schemaVersion": 2, "mediaType": INDEX, "manifests": manifests}
    if index is not None:
        parsed = _json(index, where)
        if parsed.get("mediaType", INDEX) != INDEX or not isinstance(
                parsed.get("manifests"), list):
            raise SourceError(f"{where}: the referrers tag is not an image index")
        doc = parsed
        held = parsed["manifests"]
        assert isinstance(held, list)
        manifests = held
    if any(isinstance(m, dict) and m.get("digest") == referrer for m in manifests):
        return None
    manifests.append({"mediaType": MANIFEST, "digest": referrer, "size": size,
                      "artifactType": DSSE})
    return canonical(doc)


@dataclass(frozen=True)
class Artifact:
    """An acxfs artifact's manifest as read: which format its one layer is, and the layer."""

    format: str
    layer: str  # sha256:<hex> of the bundle file
    size: int


def _json(data: bytes, where: str) -> dict[str, object]:
    try:
        return strict_json.loads_object(data, JSON_DEPTH)
    except ValueError as exc:
        raise SourceError(f"{where}: the manifest is {exc}") from None


def parse_artifact(data: bytes, where: str) -> Artifact:
    """The bundle layer of a manifest in the one form acxfs writes (SourceError otherwise)."""
    doc = _json(data, where)
    media = doc.get("mediaType")
    if media != MANIFEST or doc.get("schemaVersion") != 2:
        raise SourceError(f"{where}: not an acxfs artifact (mediaType {media})")
    artifact_type = doc.get("artifactType")
    fmt = next((f for f, (a, _) in TYPES.items() if a == artifact_type), None)
    if fmt is None:
        raise SourceError(f"{where}: not an acxfs artifact (artifactType "
                          f"{artifact_type if isinstance(artifact_type, str) else 'absent'})")
    config = doc.get("config")
    if not isinstance(config, dict) or (config.get("mediaType"), config.get("digest"),
                                        config.get("size"), config.get("data", "e30=")) != (
                                            EMPTY, EMPTY_DIGEST, 2, "e30="):
        raise SourceError(f"{where}: manifest config: not the empty descriptor")
    layers = doc.get("layers")
    if not isinstance(layers, list) or len(layers) != 1 or not isinstance(layers[0], dict):
        raise SourceError(f"{where}: manifest layers: not exactly one layer")
    layer = layers[0]
    if layer.get("mediaType") != TYPES[fmt][1]:
        raise SourceError(f"{where}: manifest layer: not {TYPES[fmt][1]}")
    digest, size = layer.get("digest"), layer.get("size")
    if not isinstance(digest, str) or not DIGEST_RE.fullmatch(digest):
        raise SourceError(f"{where}: manifest layer: digest is not sha256:<64 hex digits>")
    if not isinstance(size, int) or isinstance(size, bool) or not 0 < size <= LAYER_BYTES:
        raise SourceError(f"{where}: manifest layer: size is not 1 byte to 1 GiB")
    return Artifact(fmt, digest, size)
