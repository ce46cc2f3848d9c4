"""Trust registries (section 6): ``acx.trust-registry/1`` entries for a key and publisher, with
the namespace proof the publisher's name calls for, and the registry file's text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from scripts.cartwriter.encoding import Signer, keyid_from_pem
from scripts.cartwriter.spec import (
    GITHUB_OIDC_ISSUER,
    NOT_AFTER,
    NOT_BEFORE,
    REGISTRY_SCHEMA,
    VERIFIED_AT,
)


def namespace_proof(
    publisher: str, *, repo: str = "skills", verified_at: str = VERIFIED_AT
) -> dict[str, str]:
    """The namespace proof section 6 requires for ``publisher``: github-oidc for
    ``io.github.<owner>[...]``, else dns-txt on ``_acx-challenge.<reversed publisher root>``
    (``com.example.tools`` -> ``_acx-challenge.tools.example.com``)."""
    root = publisher.split("/")[0]
    parts = root.split(".")
    if len(parts) >= 3 and parts[:2] == ["io", "github"]:
        return {
            "method": "github-oidc",
            "oidcSubject": f"repo:{parts[2]}/{repo}",
            "oidcIssuer": GITHUB_OIDC_ISSUER,
            "verifiedAt": verified_at,
        }
    return {
        "method": "dns-txt",
        "txtRecord": "_acx-challenge." + ".".join(reversed(parts)),
        "verifiedAt": verified_at,
    }


def registry_entry(
    key: Signer | str,
    publisher: str = "io.github.example",
    *,
    status: str = "active",
    not_before: str = NOT_BEFORE,
    not_after: str = NOT_AFTER,
    revocation_reason: str | None = None,
    revoked_at: str | None = None,
    proof: dict[str, str] | None = None,
    keyid: str | None = None,
) -> dict[str, Any]:
    """One ``keys[]`` entry of an ``acx.trust-registry/1`` file.

    key: a Signer or an SPKI PEM. proof: defaults to :func:`namespace_proof` of ``publisher``.
    keyid: overrides the keyid computed from the key (to write an inconsistent entry).
    """
    pem = key.public_pem if isinstance(key, Signer) else key
    entry: dict[str, Any] = {
        "keyid": keyid or keyid_from_pem(pem),
        "publisherId": publisher,
        "algorithm": "ed25519",
        "publicKeyPem": pem,
        "status": status,
        "notBefore": not_before,
        "notAfter": not_after,
        "namespaceProof": proof if proof is not None else namespace_proof(publisher),
    }
    if revoked_at is not None:
        entry["revokedAt"] = revoked_at
    if revocation_reason is not None:
        entry["revocationReason"] = revocation_reason
    return entry


def registry_json(
    entries: Iterable[dict[str, Any]],
    *,
    registry_id: str = "acxfs-tests",
    updated_at: str | None = None,
) -> str:
    """The text of an ``acx.trust-registry/1`` file holding ``entries``."""
    doc: dict[str, Any] = {"schemaVersion": REGISTRY_SCHEMA, "registryId": registry_id}
    if updated_at is not None:
        doc["updatedAt"] = updated_at
    doc["keys"] = list(entries)
    return json.dumps(doc, indent=2) + "\n"
