"""The key `acxfs trust add PKG.azp` pins: only the key whose signature verified.

Invariant: `signer_key` returns the package's signature key only when the report's check
verified a signature by it with exactly the keyid asked for.
"""

from __future__ import annotations

from acxfs.container import Report
from acxfs.errors import EnvironmentProblem
from acxfs.formats.azp.check import AzpReport
from acxfs.signing.keys import PublicKey


def signer_key(report: Report, keyid: str) -> PublicKey:
    """The key whose signature verified in `report` (what `acxfs trust add PKG.azp` pins)."""
    signer = report.signer if isinstance(report, AzpReport) else None
    if signer is None or signer.key.keyid != keyid:
        raise EnvironmentProblem("the verified signer is not the package's signature key")
    return signer.key
