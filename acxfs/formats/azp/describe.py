"""`acxfs inspect` for a package: identity, signature and skill block, labelled by trust.

Invariant: every fact comes from `manifest.json` and `signature.json` (no payload entry is
inflated), is labelled by what vouches for it (verified, intact but untrusted, unsigned,
failed), and every string from the package is made printable before it is shown.
"""

from __future__ import annotations

from acxfs.container import Report
from acxfs.formats.azp.check import AzpReport
from acxfs.formats.azp.manifest import RESERVED, SKILLS_ROOT
from acxfs.text import printable


def _json_safe(text: str) -> str:
    """`text` that `json.dumps(ensure_ascii=False)` output can be printed with."""
    return "".join(repr(c)[1:-1] if "\ud800" <= c <= "\udfff" else c for c in text)


_IDENTITY = ("azphalt", "id", "name", "version", "kind", "publisher", "author", "license",
             "compat", "description", "homepage")


def _facts_label(report: AzpReport) -> str:
    verdict = report.verdict
    if verdict.is_integrity_failure:
        return "UNVERIFIED (the package failed its checks)"
    if verdict.status == "verified":
        return "signed (verified)"
    if report.signature_valid:
        return "signed (intact, signer not trusted)"
    return "unsigned (intact, but nothing vouches for them)"


def _payload_summary(report: AzpReport) -> dict[str, int]:
    payload = [m for name, m in report.members.items() if name not in RESERVED]
    return {"files": len(payload), "bytes": sum(m.size for m in payload),
            "storedBytes": sum(m.stored_size for m in payload)}


def _signature_doc(report: AzpReport) -> dict[str, object]:
    signer = report.signer
    doc: dict[str, object] = {"present": report.signed, "valid": report.signature_valid}
    if signer is not None:
        doc["keyid"] = signer.key.keyid
        doc["keyIdLabel"] = None if signer.label is None else _json_safe(signer.label)
        doc["countersigners"] = [k.keyid for k in signer.chain]
        doc["chainProblem"] = signer.chain_problem
    return doc


def _scalar(value: object) -> str | int | float | bool | None:
    """A manifest value fit for a report: strings made printable, anything else summarized."""
    if isinstance(value, str):
        return _json_safe(value)
    if value is None or isinstance(value, int | float | bool):
        return value
    return f"({type(value).__name__}, not shown)"


def _skill_block(manifest: dict[str, object]) -> dict[str, object] | None:
    """The skill block's defined fields: each entry's id, name and description."""
    skill = manifest.get("skill")
    if not isinstance(skill, dict):
        return None
    entries = skill.get("skills")
    listed = entries if isinstance(entries, list) else []
    return {"skills": [
        {k: _scalar(e[k]) for k in ("id", "name", "description") if k in e}
        for e in listed if isinstance(e, dict)
    ]}


def describe(report: Report) -> dict[str, object]:
    """Identity, signature and skill block from the manifest; no payload entry is inflated."""
    if not isinstance(report, AzpReport) or report.manifest is None:
        return {}
    manifest = report.manifest
    return {
        "facts": _facts_label(report),
        "package": {k: _scalar(manifest[k]) for k in _IDENTITY if k in manifest},
        "signature": _signature_doc(report),
        "payload": _payload_summary(report),
        "skill": _skill_block(manifest),
        "warnings": list(report.warnings),
    }


def _skill_lines(skill: object) -> list[str]:
    entries = skill.get("skills") if isinstance(skill, dict) else None
    if not isinstance(entries, list) or not entries:
        return ["  (none)"]
    lines: list[str] = []
    for entry in entries:
        skill_id = printable(str(entry.get("id")))
        lines.append(f"  {skill_id}  {SKILLS_ROOT}/{skill_id}/SKILL.md")
        for key in ("name", "description"):
            if key in entry:
                lines.append(f"    {key}: {printable(str(entry[key]))}")
    return lines


def render(report: Report, doc: dict[str, object]) -> str:
    """The text form of `describe`, beginning with the verdict line."""
    lines = [str(doc["verdict"])]
    if "package" not in doc:
        return "\n".join(lines) + "\n"
    identity, signature, payload = doc["package"], doc["signature"], doc["payload"]
    assert isinstance(identity, dict) and isinstance(signature, dict)
    assert isinstance(payload, dict)
    lines.append("format: azphalt package (.azp)")
    lines.append(f"package facts from manifest.json, {doc['facts']}:")
    lines += [f"  {k}: {printable(str(val))}" for k, val in identity.items()]
    if signature.get("keyid"):
        label = signature.get("keyIdLabel")
        chosen = f" (keyId {printable(repr(label))}, a name the signer chose)" if label else ""
        lines.append(f"signer: {signature['keyid']}{chosen}")
        for keyid in signature.get("countersigners") or []:
            lines.append(f"  counter-signed by: {keyid}")
    elif signature.get("present"):
        lines.append("signer: signature.json present but it did not verify")
    else:
        lines.append("signer: none (no signature.json)")
    lines.append(f"payload: {payload['files']} files, {payload['bytes']} bytes "
                 f"({payload['storedBytes']} stored)")
    if doc.get("skill") is not None:
        lines.append("skills (the manifest's skill block; each SKILL.md is authoritative):")
        lines += _skill_lines(doc["skill"])
    warnings = doc.get("warnings")
    for warning in warnings if isinstance(warnings, list) else []:
        lines.append(f"note: {warning}")
    return "\n".join(lines) + "\n"
