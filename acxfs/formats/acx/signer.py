"""The key `acxfs trust add CART.acx` pins: the embedded key, only if it is the verified signer.

Invariant: `signer_key` returns the cartridge's embedded public key only when its keyid is
the keyid whose signature verified in the report; anything else is refused.
"""

from __future__ import annotations

from acxfs.container import Report
from acxfs.errors import EnvironmentProblem
from acxfs.formats.acx.check import AcxReport
from acxfs.signing.keys import PublicKey, public_key_from_pem


def signer_key(report: Report, keyid: str) -> PublicKey:
    """The embedded key that verified as `keyid` in `report`."""
    rows = report.rows if isinstance(report, AcxReport) else None
    sig = rows.signature if rows is not None else None
    if sig is None or sig.public_key_pem is None:
        raise EnvironmentProblem("the verified signer is not the embedded key")
    key = public_key_from_pem(sig.public_key_pem)
    if key.keyid != keyid:
        raise EnvironmentProblem("the verified signer is not the embedded key")
    return key
