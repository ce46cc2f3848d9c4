"""`oci://HOST[:PORT]/REPO[:TAG|@sha256:DIGEST]`: an OCI reference and where it is asked.

Invariant: a reference is accepted only in the distribution spec's form (REPO by its
path-component pattern, TAG by its tag pattern, a digest as `sha256:` and 64 lowercase hex
digits, a PORT from 1 to 65535); `oci+http://` (plain HTTP) only for a loopback host,
refused before any connection.
Its `key` (`oci://HOST/REPO`) is what acxfs records, remembers and what policy compares, in
one spelling per registry (lowercase, no default `:443`, no leading zeros in a port).
`docker.io` (also spelled `registry-1.docker.io` or `index.docker.io`) is asked as
`registry-1.docker.io` (one-segment repositories under `library/`)
and its credentials are found under `https://index.docker.io/v1/`, as docker does.
A revision installed from a repository records its `coordinate`, `TAG@DIGEST` (no tag: named by
its digest); `reference_of` turns it back into the pinned reference.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from acxfs import semver
from acxfs.errors import EnvironmentProblem, NetworkError
from acxfs.sources.http import LOOPBACK

SCHEMES = ("oci://", "oci+http://")
SHAPE = "oci://HOST[:PORT]/REPO[:TAG|@sha256:DIGEST]"
_COMPONENT = r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*"
REPO_RE = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
TAG_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
_HOST_RE = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
                      r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])"
                      r"(?::(?P<port>[0-9]{1,5}))?")
DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
DOCKER_HUB_AUTH = "https://index.docker.io/v1/"


def is_oci(text: str) -> bool:
    return text.startswith(SCHEMES)


@dataclass(frozen=True)
class OciRef:
    """One repository of one registry, and optionally a tag or a manifest digest in it."""

    plain: bool  # oci+http:// (loopback only)
    host: str  # HOST[:PORT] as the user wrote it, lowercased
    repo: str
    tag: str | None = None
    digest: str | None = None

    @property
    def key(self) -> str:
        """The repository: what acxfs records and policy compares."""
        return f"{'oci+http' if self.plain else 'oci'}://{self.host}/{self.repo}"

    @property
    def text(self) -> str:
        if self.digest is not None:
            return f"{self.key}@{self.digest}"
        return self.key if self.tag is None else f"{self.key}:{self.tag}"

    @property
    def hostname(self) -> str:
        """The host without its port (an IPv6 address without brackets)."""
        name = self.host.rsplit(":", 1)[0] if not self.host.endswith("]") else self.host
        return name.strip("[]")

    @property
    def api(self) -> str:
        """The base of the registry's API: `https://HOST/v2/` (plain http on loopback)."""
        host = DOCKER_HUB_API if self.host == DOCKER_HUB else self.host
        return f"{'http' if self.plain else 'https'}://{host}/v2/"

    @property
    def credential_host(self) -> str:
        """The name docker's config.json files its credentials under."""
        return DOCKER_HUB_AUTH if self.host == DOCKER_HUB else self.host

    def at_tag(self, tag: str | None) -> OciRef:
        return replace(self, tag=tag, digest=None)

    def at_digest(self, digest: str) -> OciRef:
        return replace(self, tag=None, digest=digest)


def version_tag(version: str) -> str:
    """The tag a signed version is published under (`+` is not a tag character: `_`)."""
    return version.replace("+", "_")


def tag_version(tag: str) -> str | None:
    """The SemVer version a tag names (`_` for `+`: `version_tag` reversed), None for another
    tag."""
    text = tag.replace("_", "+")
    return text if semver.is_semver(text) else None


def coordinate(tag: str | None, manifest: str) -> str:
    """What a revision from an OCI repository records of where it came from."""
    return f"{tag or ''}@{manifest}"


def split_coordinate(text: str) -> tuple[str | None, str]:
    tag, _, manifest = text.rpartition("@")
    return tag or None, manifest


def reference_of(key: str, text: str) -> str:
    """The reference a revision was installed by, pinned: REPO[:TAG]@DIGEST."""
    tag, manifest = split_coordinate(text)
    return f"{key}{':' + tag if tag else ''}@{manifest}"


def follow_of(text: str) -> str | None:
    """What `update` asks of a revision's coordinate: None (the highest release tag) for a
    version tag, the tag itself for another one (`latest`), the digest for a digest."""
    tag, manifest = split_coordinate(text)
    if tag is None:
        return manifest
    return None if tag_version(tag) is not None else tag


def _host_ok(host: str) -> bool:
    """HOST, or HOST:PORT with a PORT from 1 to 65535."""
    found = _HOST_RE.fullmatch(host)
    return found is not None and (found["port"] is None or 0 < int(found["port"]) < 65536)


def _canonical_host(host: str, https: bool) -> str:
    name, port = host, ""
    if not host.endswith("]") and ":" in host:
        name, _, digits = host.rpartition(":")
        port = "" if https and int(digits) == 443 else f":{int(digits)}"
    if name in (DOCKER_HUB_API, "index.docker.io"):
        name = DOCKER_HUB
    return name + port


def _redacted(text: str) -> str:
    """`text` with any user information before the host replaced (never echo a password)."""
    scheme, sep, rest = text.partition("://")
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        authority = "***@" + authority.rpartition("@")[2]
    return f"{scheme}{sep}{authority}{slash}{path}"


def parse_ref(text: str) -> OciRef:
    """`text` as an OCI reference (EnvironmentProblem, or NetworkError for plain HTTP to a
    host that is not loopback)."""
    scheme = next((s for s in SCHEMES if text.startswith(s)), None)
    bad = EnvironmentProblem(f"{_redacted(text)}: not an OCI reference ({SHAPE})")
    if scheme is None:
        raise bad
    rest = text[len(scheme):]
    host, slash, path = rest.partition("/")
    if not slash or not _host_ok(host):
        raise bad
    host = _canonical_host(host.lower(), scheme == "oci://")
    digest = tag = None
    if "@" in path:
        path, _, digest = path.partition("@")
        if not DIGEST_RE.fullmatch(digest):
            raise bad
    else:
        last = path.rsplit("/", 1)[-1]
        if ":" in last:
            path, _, tag = path.rpartition(":")
            if not TAG_RE.fullmatch(tag):
                raise bad
    if host == DOCKER_HUB and "/" not in path:
        path = f"library/{path}"
    if not REPO_RE.fullmatch(path) or len(host) + 1 + len(path) > 255:
        raise bad
    ref = OciRef(scheme == "oci+http://", host, path, tag, digest)
    if ref.plain and ref.hostname not in LOOPBACK:
        raise NetworkError(f"{ref.key}: plain HTTP only for loopback")
    return ref


def oci_key(text: str) -> bool:
    """Whether `text` is exactly a repository's key (no tag, no digest)."""
    try:
        ref = parse_ref(text)
    except (EnvironmentProblem, NetworkError):
        return False
    return ref.tag is None and ref.digest is None and ref.key == text
