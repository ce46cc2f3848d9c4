"""The outcome of checking a container, in the standard's words, with its exit code.

A `Verdict` is a plain value: `<status> / <trust> - <summary>` plus the facts that were
verified (keyid, publisher, signedAt).  Facts are only set when a signature verified them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from acxfs.text import printable

Trust = Literal["trusted", "local", "portable", "legacy", "tampered", "malformed", "incompatible"]
MinTrust = Literal["verified", "portable", "legacy"]

EXIT_CODES: dict[str, int] = {
    "trusted": 0, "local": 0, "legacy": 3, "portable": 4, "tampered": 5, "malformed": 6,
    "incompatible": 6,
}
STATUS: dict[str, str] = {
    "trusted": "verified", "local": "verified", "legacy": "warning", "portable": "warning",
    "tampered": "invalid", "malformed": "invalid", "incompatible": "invalid",
}
_RANK = {"verified": 0, "portable": 1, "legacy": 2}

# The reference implementation's summaries, verbatim.
UNSIGNED = "Unsigned cartridge (no DSSE envelope)."
MALFORMED_ENVELOPE = "Malformed DSSE envelope."
DSSE_FAILED = "DSSE verification failed."
CONTENT_DIVERGES = "ROM content diverges from signed manifest (object hash mismatch)."
MANIFEST_MISMATCH = "ROM manifest hash mismatch (content changed after signing)."
RECORDED_MISMATCH = "Recorded manifest hash differs from recomputed ROM."
KEY_COMPROMISED = "Signer key is compromised (revoked)."
NOT_IN_REGISTRY = "Signature valid but signer not in trust registry."
REVOKED_AFTER = "Signer key later revoked (non-compromise); signed before revocation."
REVOKED = "Signer key revoked."
NOT_ELIGIBLE = "Signer registry entry is not eligible for trusted status."
UNVERIFIED = "Signature present but UNVERIFIED (no public key available)."
LOCAL = "Signed by this instance."


def trusted_summary(publisher: str) -> str:
    return f"Signed by trusted publisher {publisher}."


@dataclass(frozen=True)
class Verdict:
    trust: Trust
    summary: str
    keyid: str | None = None
    publisher: str | None = None
    signed_at: str | None = None
    unverified: bool = False  # a signature no key could check: mounted only like legacy

    @property
    def status(self) -> str:
        return STATUS[self.trust]

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.trust]

    @property
    def line(self) -> str:
        label = "malformed" if self.trust == "incompatible" else self.trust
        return printable(f"{self.status} / {label} - {self.summary}")

    @property
    def is_integrity_failure(self) -> bool:
        return self.trust in ("tampered", "malformed", "incompatible")

    def allows(self, min_trust: MinTrust) -> bool:
        """Whether a mount with `--min-trust min_trust` may serve this container."""
        if self.is_integrity_failure:
            return False
        level = "verified" if self.status == "verified" else self.trust
        if self.unverified:
            level = "legacy"
        return _RANK[level] <= _RANK[min_trust]

    def __str__(self) -> str:
        return self.line
