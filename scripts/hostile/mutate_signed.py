"""Mutators of what trust rests on: the DSSE envelope, the signed in-toto statement (kept under
the old signature or re-signed by the attacker) and the trust registry file.
"""

from __future__ import annotations

import base64
import contextlib
import json
import sqlite3
from typing import Any

from scripts import cartwriter as cw
from scripts.hostile.bases import ATTACKER, PUBLISHER, SIGNER, Chooser
from scripts.hostile.mutant import Mutant, dump_json, mutate_json, mutator


def _envelope(conn: sqlite3.Connection) -> tuple[str, dict[str, Any]] | None:
    row = conn.execute("SELECT sig_id, envelope FROM signatures "
                       "WHERE target='rom-manifest'").fetchone()
    if row is None:
        return None
    return row[0], json.loads(row[1])


@mutator
def m_envelope_json(m: Mutant, ch: Chooser) -> str:
    with contextlib.closing(m.conn()) as conn:
        found = _envelope(conn)
        if found is None:
            return "envelope_json: unsigned"
        sig_id, env = found
        how = ch.choice(["generic", "generic", "b64-urlsafe", "b64-unpadded", "extra-sig",
                         "attacker-sig", "sig-flip", "empty-keyid", "payload-type"])
        if how == "generic":
            text = dump_json(mutate_json(env, ch))
        else:
            payload = base64.b64decode(env["payload"])
            if how == "b64-urlsafe":  # still the same bytes: must stay accepted
                env["payload"] = base64.urlsafe_b64encode(payload).decode()
            elif how == "b64-unpadded":
                env["payload"] = base64.b64encode(payload).decode().rstrip("=")
            elif how == "extra-sig":
                sig = ATTACKER.sign(cw.pae(cw.PAYLOAD_TYPE, payload))
                env["signatures"].append({"keyid": ch.choice([ATTACKER.keyid, "", "x"]),
                                          "sig": base64.b64encode(sig).decode()})
            elif how == "attacker-sig":
                sig = ATTACKER.sign(cw.pae(cw.PAYLOAD_TYPE, payload))
                env["signatures"][0]["sig"] = base64.b64encode(sig).decode()
            elif how == "sig-flip":
                flipped = bytearray(base64.b64decode(env["signatures"][0]["sig"]))
                flipped[ch.integer(0, len(flipped) - 1)] ^= 1 << ch.integer(0, 7)
                env["signatures"][0]["sig"] = base64.b64encode(bytes(flipped)).decode()
            elif how == "empty-keyid":
                env["signatures"][0]["keyid"] = ""
            else:
                env["payloadType"] = ch.choice(["application/json", "", cw.PAYLOAD_TYPE + " "])
            text = json.dumps(env)
        conn.execute("UPDATE signatures SET envelope=? WHERE sig_id=?", (text, sig_id))
        return f"envelope_json {how}"


@mutator
def m_statement_json(m: Mutant, ch: Chooser) -> str:
    """Edit the signed statement; keep the old signature, or sign as the attacker."""
    with contextlib.closing(m.conn()) as conn:
        found = _envelope(conn)
        if found is None:
            return "statement_json: unsigned"
        sig_id, env = found
        statement = json.loads(base64.b64decode(env["payload"]))
        edit = ch.choice(["generic", "publisher", "digest", "signedAt", "types"])
        if edit == "generic":
            statement = mutate_json(statement, ch)
        elif edit == "publisher" and isinstance(statement.get("predicate"), dict):
            statement["predicate"]["publisherId"] = ch.choice(
                ["io.github.attacker", PUBLISHER.upper(), None, 7])
        elif edit == "digest":
            statement["subject"][0]["digest"]["sha256"] = "0" * 64
        elif edit == "signedAt" and isinstance(statement.get("predicate"), dict):
            statement["predicate"]["signedAt"] = ch.choice(
                ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "yesterday", 0,
                 "2026-01-02T03:04:05"])
        else:
            statement["_type"] = ch.choice(["https://in-toto.io/Statement/v0.1", None])
        body = dump_json(statement).encode("utf-8", "surrogatepass")
        signing = ch.choice(["stale", "attacker-own-keyid", "attacker-claims-signer"])
        keyid = {"stale": None, "attacker-own-keyid": ATTACKER.keyid,
                 "attacker-claims-signer": SIGNER.keyid}[signing]
        if keyid is None:
            env["payload"] = base64.b64encode(body).decode()
            text = json.dumps(env)
            pem_sql = ""
        else:
            text = cw.sign_envelope(body, ATTACKER, keyid)
            pem_sql = ", public_key_pem=?"
        params: tuple[Any, ...] = (text, ATTACKER.public_pem, sig_id) if pem_sql else (text, sig_id)
        conn.execute(f"UPDATE signatures SET envelope=?{pem_sql} WHERE sig_id=?", params)
        return f"statement_json {edit} {signing}"



REGISTRY_EDITS = ["generic", "status", "publisher", "dates", "private-key", "duplicate", "keyid",
                  "attacker-pem", "not-json", "proof", "unknown-field", "compromised"]


@mutator
def m_registry(m: Mutant, ch: Chooser) -> str:
    """The trust registry itself, mutated (the cartridge is left intact)."""
    doc = json.loads(json.dumps(m.base.registry))
    entry = doc["keys"][0]
    how = ch.choice(REGISTRY_EDITS)
    text = None
    if how == "generic":
        doc = mutate_json(doc, ch)
    elif how == "status":
        entry["status"] = ch.choice(["revoked", "expired", "ACTIVE", None, ["active"], 1])
        if entry["status"] == "revoked" and ch.integer(0, 1):
            entry["revokedAt"] = ch.choice(["2025-01-01T00:00:00Z", "2027-01-01T00:00:00Z"])
            entry["revocationReason"] = ch.choice(["superseded", "retired", "key-compromise"])
    elif how == "compromised":
        entry["status"] = "revoked"
        entry["revocationReason"] = ch.choice(["key-compromise", {"x": 1}, "other"])
    elif how == "publisher":
        entry["publisherId"] = ch.choice(["io.github.attacker", "", None, 5])
    elif how == "dates":
        field = ch.choice(["notBefore", "notAfter", "revokedAt"])
        entry[field] = ch.choice(["2000-01-01T00:00:00Z", "2027-01-01", "soon", 0, None,
                                  "9999-12-31T23:59:59+14:00", "0001-01-01T00:00:00-14:00"])
    elif how == "private-key":
        entry["publicKeyPem"] = cw.private_pem(bytes(32))
    elif how == "duplicate":
        doc["keys"].append(json.loads(json.dumps(entry)))
    elif how == "keyid":
        entry["keyid"] = ch.choice([ATTACKER.keyid, entry["keyid"].upper(), "", 5])
    elif how == "attacker-pem":
        entry["publicKeyPem"] = ATTACKER.public_pem
    elif how == "proof":
        entry["namespaceProof"] = mutate_json(entry["namespaceProof"], ch)
    elif how == "unknown-field":
        entry["comment"] = "x"
    else:
        text = json.dumps(doc)[: ch.integer(0, 200)]
    path = m.workdir / "registry.json"
    path.write_text(text if text is not None else dump_json(doc), encoding="utf-8",
                    errors="surrogatepass")
    m.trust_args = ["--registry", str(path)]
    m.registry_mutated = True
    return f"registry {how}"
