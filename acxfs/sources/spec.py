"""`--from SOURCE`: which kind of source it is and its one normalised spelling.

Invariant: a source is an ACX registry (a directory holding `index.json`, or a registry
clone holding `registry/index.json`; or `https://BASE/`, plain `http://` only for loopback),
an azphalt repository (`azphalt+https://BASE/`), an OCI repository (`oci://HOST/REPO`, its
tag or digest kept in `ref`), or else a directory of bundle files.  Its `key` is what acxfs
records and what policy compares: a URL with one trailing `/`, an OCI repository without tag
or digest, a directory's real path.  Nothing here reads the network; a URL that may never be
asked is refused before anything else happens.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from acxfs.errors import EnvironmentProblem
from acxfs.sources.http import check_url
from acxfs.sources.oci.reference import OciRef, is_oci, parse_ref

AZPHALT = "azphalt+"


@dataclass(frozen=True)
class SourceSpec:
    kind: Literal["registry", "azphalt", "folder", "oci"]
    key: str  # the normalised source: what acxfs records and policy compares
    base_url: str | None  # ACX or azphalt over HTTP(S): BASE with a trailing /; OCI: its API
    base_dir: str | None  # ACX in a directory: the directory that holds index.json
    ref: OciRef | None = None  # OCI: the reference as named (tag or digest, if any)

    @property
    def remote(self) -> bool:
        return self.base_url is not None

    def where(self, name: str) -> str:
        """How refusals name a file of the source."""
        if self.base_url is not None:
            return self.base_url + name
        assert self.base_dir is not None
        return os.path.join(self.base_dir, name)


def parse_source(text: str) -> SourceSpec:
    if is_oci(text):
        ref = parse_ref(text)
        return SourceSpec("oci", ref.key, ref.api, None, ref)
    if text.startswith(AZPHALT):
        url = _base(text[len(AZPHALT):])
        return SourceSpec("azphalt", AZPHALT + url, url, None)
    if "://" in text:
        url = _base(text)
        return SourceSpec("registry", url, url, None)
    real = os.path.realpath(text)
    if not os.path.isdir(real):
        raise EnvironmentProblem(f"{text}: not a directory, an https:// URL or an "
                                 "azphalt+https:// repository")
    for base in (real, os.path.join(real, "registry")):
        if os.path.isfile(os.path.join(base, "index.json")):
            return SourceSpec("registry", real, None, base)
    return SourceSpec("folder", real, None, real)  # a folder of bundle files


def is_registry(text: str) -> bool:
    """Whether a `sync --from` names a registry or repository (else a folder of files); as
    `parse_source` tells them apart, without refusing anything."""
    return "://" in text or any(os.path.isfile(os.path.join(text, *p, "index.json"))
                                for p in ((), ("registry",)))


def normalise(text: str) -> str:
    """The key of a source named in a policy (no file system or network is asked of a URL);
    an OCI prefix (`oci://HOST/PATH`) without a trailing /."""
    if is_oci(text):
        return text.rstrip("/")
    if text.startswith(AZPHALT) or "://" in text:
        return text if text.endswith("/") else text + "/"
    return os.path.realpath(text)


def _base(url: str) -> str:
    check_url(url)
    return url if url.endswith("/") else url + "/"
