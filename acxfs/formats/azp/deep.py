"""`acxfs verify` (not `--quick`) for a package: inflate and hash every listed entry.

Invariant: every payload entry of a package that passed its shallow check is read from the
file the check used and verified by `acxfs.content.rule.verify_content`; the first mismatch makes
the package tampered and leaves the report without a verified package.  Nothing is served.
"""

from __future__ import annotations

import functools
from typing import BinaryIO

from acxfs import verdict as v
from acxfs.content.rule import verify_content
from acxfs.errors import TamperError
from acxfs.formats.azp.check import AzpReport
from acxfs.formats.azp.source import package_chunks
from acxfs.limits import Limits


def deep_check(report: AzpReport, handle: BinaryIO, limits: Limits) -> None:
    """Inflate and hash every listed entry; the first mismatch makes the package tampered."""
    package = report.package
    assert package is not None
    offsets, fd = package.offsets, handle.fileno()
    for entry in package.tree.files():
        chunks = functools.partial(package_chunks, fd, offsets, entry, limits.chunk_bytes,
                                   package.path)
        try:
            verify_content(entry, chunks, limits).close()
        except TamperError as exc:
            report.verdict = v.Verdict(
                "tampered", f"Digest mismatch: {entry.path!r} differs from its manifest digest.")
            problem = str(exc).removeprefix(entry.path + " ")
            if not report.signed:  # the digest is the manifest's, and nothing signed it
                problem = problem.replace("its signed sha256", "its manifest digest (unsigned)")
            report.warnings.append(f"{entry.path!r} {problem}")
            report.checked = None
            return
