"""Every supported container format behind one table: the only place that asks which format
a file is.

Invariant: a format is chosen from the file's first bytes (never its name), and every job
is dispatched through `FORMATS`; nothing outside this module and the format packages
compares a format's name.  `check` is the non-raising report used by `verify` and
`inspect`; `open_source` is the raising path used by everything that serves bytes: it
returns a Source, reading through the process's `VerifiedCache`, only when the verdict meets
the required trust.  `identity` and `skills` answer from a verified container only.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from acxfs import verdict as v
from acxfs.container import Identity, Report, SignedFacts, Source
from acxfs.content.cache import VerifiedCache
from acxfs.errors import EnvironmentProblem, IdentityError
from acxfs.formats import acx, azp
from acxfs.formats.acx.connection import read_head
from acxfs.formats.base import Format
from acxfs.limits import DEFAULT_LIMITS, Limits
from acxfs.signing.keys import PublicKey, load_public_key_file
from acxfs.trust.policy import TrustContext, valid_publisher
from acxfs.trust.store import pin_key

__all__ = [
    "FORMATS", "Format", "check", "describe", "detect", "facts", "identity", "named",
    "open_source", "pin_from", "render", "signer_key", "skills",
]

FORMATS: tuple[Format, ...] = (acx.FORMAT, azp.FORMAT)
HEAD_BYTES = 16


def _matching(path: str) -> Format | None:
    head = read_head(path, HEAD_BYTES)
    return next((f for f in FORMATS if f.matches(head)), None)


def detect(path: str) -> Format:
    """The format of `path` by its first bytes; a file no format claims is read as the
    first format, whose check then says what is wrong with it."""
    return _matching(path) or FORMATS[0]


def _of(report: Report) -> Format:
    return next(f for f in FORMATS if f.name == report.format)


def check(
    path: str, trust: TrustContext, *, deep: bool = False, limits: Limits = DEFAULT_LIMITS,
    now: dt.datetime | None = None,
) -> Report:
    """The verdict on `path` (EnvironmentProblem only when it cannot be read at all)."""
    return detect(path).check(path, trust, deep=deep, limits=limits, now=now)


def open_source(
    path: str, trust: TrustContext, cache: VerifiedCache, *, min_trust: v.MinTrust = "verified",
    with_save: bool = False, limits: Limits = DEFAULT_LIMITS,
) -> tuple[Source, Report]:
    """A source for `path` reading through `cache` if its verdict meets `min_trust`, with the
    report of the one check it passed (its verdict, identity and skills); UntrustedError
    otherwise."""
    return detect(path).open(path, trust, cache, min_trust=min_trust, with_save=with_save,
                             limits=limits)


def describe(report: Report) -> dict[str, object]:
    """What `inspect --json` prints: the verdict line, the format, and its labelled facts."""
    doc: dict[str, object] = {"verdict": report.verdict.line, "format": report.format}
    doc.update(_of(report).describe(report))
    return doc


def render(report: Report, doc: dict[str, object]) -> str:
    """The text form of `describe`, beginning with the verdict line."""
    return _of(report).render(report, doc)


def identity(report: Report) -> Identity:
    """The bundle's signed identity; IdentityError unless `report` holds a verified container."""
    if report.checked is None or report.verdict.is_integrity_failure:
        raise IdentityError(f"no signed identity: {report.verdict.line}")
    return _of(report).identity(report)


def named(report: Report, name: str) -> bool:
    """Whether `report` is of the format called `name` (what another table, such as an OCI
    artifact's media types, says a file must be)."""
    return report.format == name


def facts(report: Report) -> SignedFacts:
    """The signed facts besides the identity, from a verified container only."""
    if report.checked is None or report.verdict.is_integrity_failure:
        raise IdentityError(f"no signed facts: {report.verdict.line}")
    return _of(report).facts(report)


def skills(report: Report) -> dict[str, str]:
    """Skill name -> tree path of its directory, from the verified tree only."""
    if report.checked is None or report.verdict.is_integrity_failure:
        raise IdentityError(f"no verified skills: {report.verdict.line}")
    return _of(report).skills(report)


def signer_key(path: str) -> tuple[PublicKey, str | None]:
    """The key that signed the intact container `path`, and the publisher it signed for.

    Never the key of a tampered, unsigned or unverifiable container (EnvironmentProblem)."""
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
    return _of(report).signer_key(report, verdict.keyid), verdict.publisher


def pin_from(source: str, publisher: str | None) -> tuple[str, str, Path, str | None]:
    """`acxfs trust add`: pin the key that signed the container `source` (only after its
    signature verified with that key and its integrity checks passed), or the public key
    file `source`, for exactly one publisher: `publisher`, else the one the container's
    signed statement names; none (or one that is no reverse-DNS name) is no pin.  Returns
    (keyid, publisher, pin file, the publisher of a pin of that key it replaced, if it named
    another one)."""
    if publisher is not None and not valid_publisher(publisher):
        raise EnvironmentProblem(f"publisher {publisher!r} is not a reverse-DNS name")
    if _matching(source) is not None:
        key, signed_publisher = signer_key(source)
        if publisher is None and signed_publisher is not None \
                and not valid_publisher(signed_publisher):
            raise EnvironmentProblem(
                f"{source} is signed for publisher {signed_publisher!r}, which is not a "
                "reverse-DNS name; pass --publisher ID")
        chosen = publisher or signed_publisher
        note = f"pinned from {Path(source).name}"
    else:
        key = load_public_key_file(source)
        chosen = publisher
        note = f"pinned from key file {Path(source).name}"
    path, replaced = pin_key(key, chosen, note)
    assert chosen is not None  # pin_key makes no pin without a publisher
    return key.keyid, chosen, path, replaced
