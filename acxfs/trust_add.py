"""`acxfs trust add`: pin the key that signed an intact container, or a public key file.

A container's key is pinned only after its signature verified with that key and its
integrity checks passed: acxfs never pins the key of a tampered or unsigned container.
"""

from __future__ import annotations

from pathlib import Path

from acxfs.errors import EnvironmentProblem
from acxfs.keys import PublicKey, load_public_key_file
from acxfs.loader import check, detect_format
from acxfs.sources.acx_file import read_head
from acxfs.trust import TrustContext, add_pin, list_pins, valid_publisher


def _container_key(path: str, head: bytes) -> tuple[PublicKey, str | None]:
    if not (head.startswith(b"SQLite format 3") or head.startswith(b"PK")):
        raise EnvironmentProblem(f"{path}: neither a container nor a public key file")
    report = check(path, TrustContext())
    verdict = report.verdict
    if verdict.is_integrity_failure:
        raise EnvironmentProblem(f"will not pin the key of {path}: {verdict.line}")
    if verdict.trust == "legacy":
        raise EnvironmentProblem(f"{path} is unsigned; there is no key to pin")
    if verdict.unverified or verdict.keyid is None:
        raise EnvironmentProblem(
            f"{path} carries no public key for {verdict.keyid}; pin the signer's key file "
            "instead: acxfs trust add KEY.pub.pem --publisher ID"
        )
    key = report_key(report, verdict.keyid)
    return key, verdict.publisher


def report_key(report: object, keyid: str) -> PublicKey:
    from acxfs.loader import Report

    assert isinstance(report, Report)
    if report.format == "azp":
        from acxfs.sources import azp

        return azp.signer_key(report, keyid)
    assert report.cartridge is not None and report.cartridge.rows is not None
    sig = report.cartridge.rows.signature
    assert sig is not None and sig.public_key_pem is not None
    from acxfs.keys import public_key_from_pem

    key = public_key_from_pem(sig.public_key_pem)
    if key.keyid != keyid:
        raise EnvironmentProblem("the verified signer is not the embedded key")
    return key


def pin_from(
    source: str, publisher: str | None
) -> tuple[str, str | None, Path, str | None]:
    """Pin the key of `source`; returns (keyid, publisher, pin file, the publisher of a pin
    of that key it replaced, if it named another one)."""
    if publisher is not None and not valid_publisher(publisher):
        raise EnvironmentProblem(f"publisher {publisher!r} is not a reverse-DNS name")
    head = read_head(source, 16)
    if head.startswith(b"SQLite format 3") or detect_format(source) == "azp":
        key, signed_publisher = _container_key(source, head)
        chosen = publisher or signed_publisher
        note = f"pinned from {Path(source).name}"
    else:
        key = load_public_key_file(source)
        chosen = publisher
        note = f"pinned from key file {Path(source).name}"
    earlier = next((p for p in list_pins() if p.keyid == key.keyid), None)
    if chosen is None and earlier is not None and earlier.publisher is not None:
        raise EnvironmentProblem(
            f"{key.keyid} is pinned for publisher {earlier.publisher} only; pinning it again "
            "without --publisher would trust it for any publisher. Pass --publisher, or "
            f"run 'acxfs trust remove {key.keyid}' first")
    path = add_pin(key, chosen, note)
    replaced = earlier.publisher if earlier is not None and earlier.publisher != chosen else None
    return key.keyid, chosen, path, replaced
