"""The trust policy as data (`acxfs.trust.policy`), without a file: what a registry document
must hold, which namespace proof fits which publisher, how timestamps are read, and the
section 6 taxonomy `TrustContext.evaluate` gives a signer whose signature verified.

Keys are made here with PyNaCl and encoded by hand (SPKI DER in PEM), never by acxfs.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
from typing import Any

import nacl.signing
import pytest

from acxfs import verdict as v
from acxfs.errors import TrustConfigError
from acxfs.limits import Limits
from acxfs.signing.keys import PublicKey
from acxfs.trust.policy import (
    OIDC_ISSUER,
    Pin,
    TrustContext,
    namespace_proof_fits,
    parse_registry,
    parse_time,
    valid_publisher,
)

SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")
PUBLISHER = "io.github.example"
NOW = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
SIGNED = "2026-05-01T00:00:00Z"


def raw_key(seed: int) -> bytes:
    return bytes(nacl.signing.SigningKey(bytes([seed]) * 32).verify_key)


def pem(raw: bytes) -> str:
    body = base64.b64encode(SPKI_PREFIX + raw).decode()
    return f"-----BEGIN PUBLIC KEY-----\n{body}\n-----END PUBLIC KEY-----\n"


def keyid(raw: bytes) -> str:
    return "ed25519:" + hashlib.sha256(SPKI_PREFIX + raw).hexdigest()


KEY, OTHER = raw_key(1), raw_key(2)


def github_proof(owner: str = "example") -> dict[str, str]:
    return {"method": "github-oidc", "oidcSubject": f"repo:{owner}/skills",
            "oidcIssuer": OIDC_ISSUER, "verifiedAt": "2026-01-01T00:00:00Z"}


def entry(raw: bytes = KEY, **changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "keyid": keyid(raw), "publisherId": PUBLISHER, "algorithm": "ed25519",
        "publicKeyPem": pem(raw), "status": "active", "notBefore": "2026-01-01T00:00:00Z",
        "notAfter": "2099-01-01T00:00:00Z", "namespaceProof": github_proof(),
    }
    for name, value in changes.items():
        if value is None:
            doc.pop(name, None)
        else:
            doc[name] = value
    return doc


def registry(*entries: dict[str, Any], **top: Any) -> str:
    doc = {"schemaVersion": "acx.trust-registry/1", "registryId": "tests", "keys": list(entries)}
    doc.update(top)
    return json.dumps(doc)


# --- parse_time --------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-05-01T12:30:00Z", dt.datetime(2026, 5, 1, 12, 30, tzinfo=dt.UTC)),
    ("2026-05-01T12:30:00+02:00", dt.datetime(2026, 5, 1, 10, 30, tzinfo=dt.UTC)),
    (" 2026-05-01T12:30:00.5Z ", dt.datetime(2026, 5, 1, 12, 30, 0, 500000, tzinfo=dt.UTC)),
    ("2026-05-01T12:30:00", dt.datetime(2026, 5, 1, 12, 30, tzinfo=dt.UTC)),  # naive: UTC
    ("2026-05-01", dt.datetime(2026, 5, 1, tzinfo=dt.UTC)),
])
def test_a_timestamp_is_read_as_an_aware_moment(text: str, expected: dt.datetime) -> None:
    parsed = parse_time(text)
    assert parsed == expected and parsed is not None and parsed.tzinfo is not None


@pytest.mark.parametrize("text", [None, 20260501, "", "yesterday", "2026-13-01T00:00:00Z",
                                  "2026-05-01T25:00:00Z", ["2026-05-01"]])
def test_what_is_no_timestamp_is_none(text: object) -> None:
    assert parse_time(text) is None


# --- namespace_proof_fits ----------------------------------------------------------------------


def test_a_github_publisher_needs_the_oidc_proof_of_its_owner() -> None:
    assert namespace_proof_fits("io.github.example", github_proof())
    assert namespace_proof_fits("io.github.example.tools", github_proof())
    assert not namespace_proof_fits("io.github.example", github_proof("attacker"))
    assert not namespace_proof_fits("io.github.example", github_proof("examplex"))
    assert not namespace_proof_fits("io.github.example",
                                    {**github_proof(), "oidcIssuer": "https://evil.example"})
    assert not namespace_proof_fits("io.github.example", {**github_proof(), "method": "dns-txt"})
    assert not namespace_proof_fits("io.github.example", {**github_proof(), "extra": "x"})
    proof = github_proof()
    del proof["verifiedAt"]
    assert not namespace_proof_fits("io.github.example", proof)


def test_another_publisher_needs_the_dns_txt_record_of_its_reversed_name() -> None:
    good = {"method": "dns-txt", "txtRecord": "_acx-challenge.tools.example.com",
            "verifiedAt": "2026-01-01T00:00:00Z"}
    assert namespace_proof_fits("com.example.tools", good)
    assert not namespace_proof_fits("com.example", good)
    assert not namespace_proof_fits("com.example.tools",
                                    {**good, "txtRecord": "_acx-challenge.com.example.tools"})
    assert not namespace_proof_fits("com.example.tools", github_proof())
    # io.github with no owner is an ordinary two-label name: the dns-txt rule applies
    assert namespace_proof_fits("io.github", {**good, "txtRecord": "_acx-challenge.github.io"})
    assert not namespace_proof_fits("io.github", github_proof())


@pytest.mark.parametrize("proof", [None, "github-oidc", ["method"], {},
                                   {**github_proof(), "verifiedAt": 20260101}])
def test_a_proof_that_is_not_an_object_of_strings_never_fits(proof: object) -> None:
    assert not namespace_proof_fits("io.github.example", proof)


@pytest.mark.parametrize(("name", "ok"), [
    ("io.github.example", True), ("com.example", True), ("a.b-c.d0", True),
    ("example", False), ("Com.example", False), ("com..example", False), ("com.-x", False),
    ("com.x-", False), ("com.example.", False), ("io.github.中文", False), ("", False),
])
def test_a_publisher_is_a_lower_case_reverse_dns_name(name: str, ok: bool) -> None:
    assert valid_publisher(name) is ok


# --- parse_registry ----------------------------------------------------------------------------


def test_a_well_formed_registry_gives_its_keys() -> None:
    revoked = entry(OTHER, status="revoked", revokedAt="2026-03-01T00:00:00Z",
                    revocationReason="superseded")
    keys = parse_registry(registry(entry(), revoked, updatedAt="2026-04-01T00:00:00Z"), "r.json")
    assert [k.keyid for k in keys] == [keyid(KEY), keyid(OTHER)]
    first, second = keys
    assert first.key == PublicKey(KEY) and first.publisher == PUBLISHER
    assert first.status == "active" and first.source == "r.json"
    assert first.not_before == dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    assert first.revoked_at is None and first.revocation_reason is None and first.proof_fits()
    assert second.revoked_at == dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    assert second.revocation_reason == "superseded"


def test_an_empty_key_list_is_a_registry_with_no_keys() -> None:
    assert parse_registry(registry(), "r.json") == []


@pytest.mark.parametrize(("text", "why"), [
    ("[]", "not a JSON object"),
    ("{", "not JSON"),
    ('{"schemaVersion": "acx.trust-registry/1", "keys": [], "keys": []}', "duplicate key"),
    ('{"schemaVersion": "acx.trust-registry/1", "keys": [NaN]}', "not JSON"),
    (registry(extra=1), "unknown field 'extra'"),
    (registry(schemaVersion="acx.trust-registry/2"), "schemaVersion is not"),
    (json.dumps({"keys": []}), "schemaVersion is not"),
    (registry(keys={"a": 1}), "keys is not a list"),
    (registry(keys=["x"]), "a key entry is not an object"),
    (registry(entry(namespaceProof=None)), "lacks 'namespaceProof'"),
    (registry(entry(comment="hi")), "unknown field 'comment'"),
    (registry(entry(), entry()), "duplicate or invalid keyid"),
    (registry(entry(keyid=7)), "duplicate or invalid keyid"),
    (registry(entry(status=1)), "status must be a string"),
    (registry(entry(algorithm="rsa")), "algorithm is not ed25519"),
    (registry(entry(status="ACTIVE")), "unknown status 'ACTIVE'"),
    (registry(entry(revocationReason="lost")), "unknown revocationReason 'lost'"),
    (registry(entry(publisherId=["io.github.example"])), "must be strings"),
    (registry(entry(publicKeyPem="-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----")),
     "publicKeyPem: not an Ed25519"),
    (registry(entry(keyid=keyid(OTHER))), "publicKeyPem has keyid"),
    (registry(entry(notAfter="forever")), "notBefore/notAfter are not timestamps"),
    (registry(entry(notBefore=None, notAfter="2099-01-01")), "lacks 'notBefore'"),
    (registry(entry(revokedAt="soon")), "revokedAt is not a timestamp"),
    ("PRIVATE KEY" + registry(), "private key material"),
])
def test_a_registry_document_that_breaks_a_rule_is_refused_naming_it(text: str, why: str) -> None:
    with pytest.raises(TrustConfigError) as caught:
        parse_registry(text, "r.json")
    message = str(caught.value)
    assert message.startswith("trust registry r.json is unusable: ") and why in message


def test_a_registry_over_the_size_bound_is_refused_before_it_is_parsed() -> None:
    text = registry(entry())
    with pytest.raises(TrustConfigError, match="too large"):
        parse_registry(text, "r.json", Limits(max_registry_bytes=len(text) - 1))
    assert len(parse_registry(text, "r.json", Limits(max_registry_bytes=len(text)))) == 1


# --- TrustContext.evaluate ---------------------------------------------------------------------


def context(*entries: dict[str, Any], pins: tuple[Pin, ...] = (),
            local: tuple[bytes, ...] = ()) -> TrustContext:
    keys = parse_registry(registry(*entries), "r.json") if entries else []
    return TrustContext(keys, list(pins), {keyid(raw): PublicKey(raw) for raw in local})


def decide(ctx: TrustContext, raw: bytes = KEY, publisher: str | None = PUBLISHER,
           signed_at: str | None = SIGNED, now: dt.datetime = NOW) -> tuple[str, str]:
    decision = ctx.evaluate(keyid(raw), publisher, signed_at, now)
    return decision.trust, decision.summary


def pin(raw: bytes, publisher: str | None) -> Pin:
    return Pin(keyid(raw), PublicKey(raw), publisher, "pins/x.json")


def test_an_eligible_active_registry_key_is_trusted() -> None:
    assert decide(context(entry())) == ("trusted", v.trusted_summary(PUBLISHER))


def test_a_key_nobody_named_is_only_portable() -> None:
    assert decide(TrustContext()) == ("portable", v.NOT_IN_REGISTRY)
    assert decide(context(entry(OTHER))) == ("portable", v.NOT_IN_REGISTRY)


@pytest.mark.parametrize(("changes", "publisher", "signed_at", "now"), [
    ({"status": "expired"}, PUBLISHER, SIGNED, NOW),
    ({}, "io.github.other", SIGNED, NOW),  # the entry is for another publisher
    ({}, None, SIGNED, NOW),  # the statement names no publisher
    ({}, PUBLISHER, None, NOW),  # no signing time
    ({}, PUBLISHER, "2025-12-31T23:59:59Z", NOW),  # signed before notBefore
    ({"notAfter": "2026-05-15T00:00:00Z"}, PUBLISHER, SIGNED, NOW),  # expired since
    ({"notAfter": "2026-04-01T00:00:00Z"}, PUBLISHER, SIGNED, NOW),  # signed after notAfter
    ({"namespaceProof": github_proof("attacker")}, PUBLISHER, SIGNED, NOW),
])
def test_a_registry_entry_that_is_not_eligible_is_only_portable(
        changes: dict[str, Any], publisher: str | None, signed_at: str | None,
        now: dt.datetime) -> None:
    assert decide(context(entry(**changes)), publisher=publisher, signed_at=signed_at,
                  now=now) == ("portable", v.NOT_ELIGIBLE)


def test_the_validity_window_includes_its_ends() -> None:
    ctx = context(entry(notBefore=SIGNED, notAfter="2026-06-01T00:00:00Z"))
    assert decide(ctx, signed_at=SIGNED, now=NOW)[0] == "trusted"


def test_a_key_revoked_for_compromise_is_tampered_whatever_else_vouches_for_it() -> None:
    revoked = entry(status="revoked", revocationReason="key-compromise",
                    revokedAt="2026-06-01T00:00:00Z")
    ctx = context(revoked, pins=(pin(KEY, PUBLISHER),), local=(KEY,))
    assert decide(ctx) == ("tampered", v.KEY_COMPROMISED)


def test_a_key_revoked_otherwise_is_portable_and_says_whether_it_signed_before() -> None:
    revoked = entry(status="revoked", revocationReason="superseded",
                    revokedAt="2026-05-02T00:00:00Z")
    assert decide(context(revoked)) == ("portable", v.REVOKED_AFTER)
    assert decide(context(revoked), signed_at="2026-05-03T00:00:00Z") == ("portable", v.REVOKED)
    assert decide(context(revoked), signed_at=None) == ("portable", v.REVOKED)
    without_date = entry(status="revoked", revocationReason="retired")
    assert decide(context(without_date)) == ("portable", v.REVOKED)


def test_a_revocation_overrides_a_pin_and_the_local_key() -> None:
    revoked = entry(status="revoked", revocationReason="retired", revokedAt=SIGNED)
    assert decide(context(revoked, pins=(pin(KEY, PUBLISHER),), local=(KEY,))) == (
        "portable", v.REVOKED)


def test_the_local_key_is_local_for_any_publisher() -> None:
    assert decide(context(local=(KEY,)), publisher=None) == ("local", v.LOCAL)
    assert decide(context(local=(KEY,)), publisher="io.github.anthropics") == ("local", v.LOCAL)


def test_a_pin_trusts_its_key_for_its_own_publisher_only() -> None:
    ctx = context(pins=(pin(KEY, PUBLISHER),))
    assert decide(ctx) == ("trusted", v.trusted_summary(PUBLISHER))
    assert decide(ctx, publisher="io.github.anthropics") == ("portable", v.NOT_ELIGIBLE)
    assert decide(ctx, publisher=None) == ("portable", v.NOT_ELIGIBLE)
    assert decide(ctx, OTHER) == ("portable", v.NOT_IN_REGISTRY)


def test_a_trust_key_for_one_command_covers_any_named_publisher_but_not_none() -> None:
    ctx = context(pins=(pin(KEY, None),))
    assert decide(ctx, publisher="io.github.anthropics") == (
        "trusted", v.trusted_summary("io.github.anthropics"))
    assert decide(ctx, publisher=None) == ("portable", v.NOT_ELIGIBLE)


def test_key_for_finds_keys_from_every_source_and_nothing_else() -> None:
    ctx = context(entry(), pins=(pin(OTHER, PUBLISHER),), local=(raw_key(3),))
    assert ctx.key_for(keyid(KEY)) == PublicKey(KEY)
    assert ctx.key_for(keyid(OTHER)) == PublicKey(OTHER)
    assert ctx.key_for(keyid(raw_key(3))) == PublicKey(raw_key(3))
    assert ctx.key_for(keyid(raw_key(4))) is None
