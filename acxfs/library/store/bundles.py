"""Bundle files copied into the library's store, checked in full as the copy.

Invariant: a file is named `<sha256>.<format>` in the store only after the copy itself (not
the file the user named) passed the full check (structure, signature, trust, every byte) and
its identity and skill names were read from its signed facts; it is read-only from then on
and never changed.  What is checked is what is served.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass

from acxfs.container import Report
from acxfs.errors import RefusedError, UntrustedError
from acxfs.library.links.agent_links import private_dir
from acxfs.library.store.state import Revision, now_text
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

    def discard(self, paths: LibraryPaths) -> None:
        """Remove the store copy this check brought (a refusal after the check), if any;
        a file that was already in the store stays."""
        if self.new_file:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(paths.store / self.revision.file)


def untrusted(where: str, exc: UntrustedError, file: bool) -> RefusedError:
    """The refusal of a bundle whose signer is not trusted, naming the command that would
    trust it: the file (or the signer's key file), the keyid, the signed publisher."""
    verdict = exc.verdict
    publisher = verdict.publisher or "ID"
    if verdict.keyid and file:
        how = f"acxfs trust add {where} --publisher {publisher} (pins {verdict.keyid})"
    elif verdict.keyid:
        how = (f"acxfs trust add KEY.pub.pem --publisher {publisher} with the key of "
               f"{verdict.keyid}")
    else:
        how = "acxfs trust add KEY.pub.pem --publisher ID"
    return RefusedError(f"{where}: {verdict.line}; the library serves only verified bundles: "
                        f"trust its signer with '{how}' or install its registry: acxfs trust "
                        "add REGISTRY.json", exit_code=verdict.exit_code)


def import_bundle(path: str, paths: LibraryPaths, trust: TrustContext) -> Checked:
    """Copy `path` into the store, check the copy in full, then name it by its digest."""
    source = open_input(path)
    try:
        return import_staged(lambda write: _copy(source.fileno(), write), paths, trust)
    finally:
        source.close()


def _copy(fd: int, write: Callable[[bytes], None]) -> None:
    while chunk := os.read(fd, 1 << 20):
        write(chunk)


def import_staged(fill: Callable[[Callable[[bytes], None]], None], paths: LibraryPaths,
                  trust: TrustContext,
                  before_check: Callable[[str], None] | None = None) -> Checked:
    """Have `fill` write a bundle's bytes into the store's staging copy; `before_check` sees
    the copy's sha256 before anything parses it; then check the copy in full and name it by
    its digest.  A refusal anywhere leaves nothing in the store."""
    private_dir(paths.store)
    store_fd = safe_dirs.open_dir(paths.store)
    hasher = hashlib.sha256()
    try:
        staged = safe_files.open_new_at(store_fd, "incoming", 0o400)
    except BaseException:
        os.close(store_fd)
        raise
    committed = False
    try:
        def write(chunk: bytes) -> None:
            hasher.update(chunk)
            staged.write(chunk)

        fill(write)
        digest = hasher.hexdigest()
        if before_check is not None:
            before_check(digest)
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
    verified), and the revision it establishes.  The formats (SQLite, zip, Ed25519, the
    SKILL.md reader) load here: the library's commands that check no bundle never load them."""
    from acxfs import formats
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
