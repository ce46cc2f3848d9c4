"""Rollback protection: a version of an identity below its floor is never installed silently.

Invariant: the floor of an identity is the highest version (SemVer 2.0 precedence) the library
ever installed for it; a bundle below the floor, or with a version already installed or at
the floor but another signed release (manifest) under it, is refused unless the user passed
`--allow-downgrade`.  The same release re-signed (same manifest, another file) is accepted.
"""

from __future__ import annotations

from acxfs import semver
from acxfs.errors import RefusedError
from acxfs.library.store.state import Floor, Installed, Revision


def check_floor(rev: Revision, installed: Installed | None, floor: Floor | None,
                allow_downgrade: bool) -> None:
    """RefusedError when installing `rev` would go backwards or reuse a version number."""
    version = semver.parse(rev.version)
    if allow_downgrade:
        return
    if floor is not None:
        lowest = semver.parse(floor.version)
        if version < lowest:
            raise RefusedError(
                f"rollback refused: {rev.identity} {rev.version} is older than {floor.version}, "
                f"installed on {floor.installed_at[:10]}; --allow-downgrade to install it anyway")
        if version == lowest and rev.manifest != floor.manifest:
            raise _same_number(rev, floor.version)
    for other in installed.revisions() if installed else []:
        if semver.parse(other.version) == version and other.manifest != rev.manifest:
            raise _same_number(rev, other.version)


def _same_number(rev: Revision, seen: str) -> RefusedError:
    return RefusedError(
        f"refused: {rev.identity} {rev.version} is another release under the number {seen} "
        "installed before (its signed manifest differs); --allow-downgrade to install it anyway")


def raised_floor(rev: Revision, floor: Floor | None) -> Floor | None:
    """The floor after installing `rev` (None: unchanged).  Never lowered."""
    if floor is None or semver.parse(rev.version) > semver.parse(floor.version):
        return Floor(rev.version, rev.manifest, rev.installed_at)
    return None
