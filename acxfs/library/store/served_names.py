"""The name a revision is served under: one directory right below the library's mountpoint,
holding that revision's skill directories (`mnt/<served name>/<skill>/`).

Invariant: a served name is one path component that names one store file for good, so the
same path always means the same verified bytes and the kernel may keep what it learnt of it:
`<identity>@<version>-<digest12>`, the identity's `/` written `+` (neither `+` nor `@` can
occur in an identity part or a version, which are safe path segments), or, when that would
be longer than a file name may be, the store file's whole sha256.  Two store files share a
served name only if they are one identity and version whose sha256 begin alike for 48 bits,
as with any path of the library.

One component keeps every skill's real path short: agents that resolve each link one
component at a time, or look for plugin manifests in every ancestor of a skill's directory,
pay for each level a skill does not share with the others.
"""

from __future__ import annotations

NAME_MAX = 255  # bytes of one file name (Linux)
DIGEST_SHOWN = 12  # hex digits of the store file's sha256 in a readable name


def served_name(identity: str, version: str, digest: str) -> str:
    """Where the store file with sha256 `digest` (hex) of `identity` at `version` is served."""
    readable = f"{identity.replace('/', '+')}@{version}-{digest[:DIGEST_SHOWN]}"
    return readable if len(readable.encode()) <= NAME_MAX else digest


def is_served_name(name: str) -> bool:
    """Whether a daemon serves under `name` as this module names revisions (one component),
    not under an earlier acxfs's nested path."""
    return "/" not in name


def earlier_path(identity: str, version: str, digest: str) -> str:
    """Where an earlier acxfs served that store file (`<identity>/<version>-<digest12>`, nested
    below the mountpoint): only to recognise the links it made, never to serve."""
    return f"{identity}/{version}-{digest[:DIGEST_SHOWN]}"
