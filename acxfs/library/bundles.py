"""Bundle files copied into the library's store, checked in full as the copy.

Invariant: a file is named `<sha256>.<format>` in the store only after the copy itself (not
the file the user named) passed the full check (structure, signature, trust, every byte) and
its identity and skill names were read from its signed facts; it is read-only from then on
and never changed.  What is checked is what is served.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from acxfs import formats
from acxfs.container import Report
from acxfs.errors import UntrustedError
from acxfs.library.agent_links import private_dir
from acxfs.library.state import Revision, now_text
from acxfs.paths import LibraryPaths
from acxfs.safe import dirs as safe_dirs
from acxfs.safe import files as safe_files
from acxfs.safe.inputs import open_input
from acxfs.trust.policy import TrustContext


@dataclass(frozen=True)
class Checked:
    """A store file that passed the full check, and what the check established."""

    revision: Revision
    report: Report
    new_file: bool  # False: the same bytes were already in the store


def import_bundle(path: str, paths: LibraryPaths, trust: TrustContext) -> Checked:
    """Copy `path` into the store, check the copy in full, then name it by its digest."""
    private_dir(paths.store)
    source = open_input(path)
    store_fd = safe_dirs.open_dir(paths.store)
    hasher = hashlib.sha256()
    try:
        staged = safe_files.copy_fd_at(store_fd, "incoming", source.fileno(), 0o400, hasher.update)
    except BaseException:
        os.close(store_fd)
        raise
    finally:
        source.close()
    committed = False
    try:
        digest = hasher.hexdigest()
        report, revision = _checked(staged.proc_path, digest, trust)
        name = revision.file
        new_file = not os.path.lexists(paths.store / name)
        if new_file:
            staged.name = name
            staged.commit()
            committed = True
        return Checked(revision, report, new_file)
    finally:
        if not committed:
            staged.discard()
        os.close(store_fd)


def _checked(path: str, digest: str, trust: TrustContext) -> tuple[Report, Revision]:
    """The full check of the file `path` whose bytes hash to `digest` (UntrustedError below
    verified), and the revision it establishes."""
    report = formats.check(path, trust, deep=True)
    if not report.verdict.allows("verified") or report.verdict.status != "verified":
        raise UntrustedError(report.verdict)
    identity = formats.identity(report)
    skills = formats.skills(report)
    revision = Revision(
        digest=digest, file=f"{digest}.{report.format}", format=report.format,
        identity=identity.name, version=identity.version, manifest=identity.release,
        keyid=report.verdict.keyid or "", publisher=report.verdict.publisher, skills=skills,
        installed_at=now_text(),
    )
    return report, revision


def check_stored(name: str, paths: LibraryPaths, trust: TrustContext) -> Checked:
    """The store file `name` checked in full again, against `trust` as it is now (its digest
    computed from the same open file that is checked)."""
    source = open_input(paths.store / name)
    try:
        hasher = hashlib.sha256()
        while chunk := source.read(1 << 20):
            hasher.update(chunk)
        report, revision = _checked(f"/proc/self/fd/{source.fileno()}", hasher.hexdigest(),
                                    trust)
    finally:
        source.close()
    return Checked(revision, report, new_file=False)
