"""`acxfs inspect` for a cartridge: its summary from its rows, every fact labelled by trust.

Invariant: only cartridge keys bound by a verified object are shown as signed; the skill
list comes from `acx_skill`, an unsigned cache, and is labelled as index data; every line
of text is made printable.  No BLOB is inflated.
"""

from __future__ import annotations

from acxfs.container import Report
from acxfs.formats.acx.check import AcxReport
from acxfs.text import printable


def describe(report: Report) -> dict[str, object]:
    """The cartridge's facts (without the verdict and format, which the caller adds)."""
    rows = report.rows if isinstance(report, AcxReport) else None
    if rows is None:
        return {}
    verified = report.cartridge if isinstance(report, AcxReport) else None
    signed_keys = verified.signed_meta if verified else frozenset()
    doc: dict[str, object] = {}
    doc["userVersion"] = f"0x{rows.user_version:08x}"
    doc["signedMeta"] = {k: rows.meta[k] for k in sorted(rows.meta) if k in signed_keys}
    doc["unsignedMeta"] = {k: rows.meta[k] for k in sorted(rows.meta) if k not in signed_keys}
    rom, save = rows.rom_files, rows.save_files
    doc["rom"] = {"files": len(rom), "bytes": sum(r.sz for r in rom),
                  "storedBytes": sum(r.stored_len for r in rom)}
    doc["save"] = {"files": len(save), "bytes": sum(r.sz for r in save)}
    doc["objects"] = len([o for o in rows.objects if o.zone == "rom"])
    doc["skillIndex"] = [
        {"sqlarPath": s.sqlar_path, "name": s.name, "description": s.description,
         "license": s.license, "version": s.skill_version}
        for s in rows.skills
    ]
    doc["skillDirectories"] = list(verified.skills) if verified else []
    return doc


def render(report: Report, doc: dict[str, object]) -> str:
    """The text form of `describe`, beginning with the verdict line."""
    lines = [str(doc["verdict"])]
    if "rom" not in doc:
        return "\n".join(lines) + "\n"
    intact = isinstance(report, AcxReport) and report.cartridge is not None
    signed = doc["signedMeta"]
    unsigned = doc["unsignedMeta"]
    assert isinstance(signed, dict) and isinstance(unsigned, dict)
    lines.append(f"format: ACX cartridge, user_version {doc['userVersion']}")
    label = "signed (verified)" if report.verdict.status == "verified" else (
        "signed (intact, signer not trusted)" if intact and signed else "recorded (UNVERIFIED)")
    if signed:
        lines.append(f"cartridge facts, {label}:")
        lines += [f"  {k}: {val}" for k, val in signed.items()]
    lines.append("unsigned metadata (not covered by the signature):")
    lines += [f"  {k}: {val}" for k, val in unsigned.items()]
    rom, save = doc["rom"], doc["save"]
    assert isinstance(rom, dict) and isinstance(save, dict)
    lines.append(f"ROM: {rom['files']} files, {rom['bytes']} bytes ({rom['storedBytes']} stored), "
                 f"{doc['objects']} signed objects")
    lines.append(f"SAVE: {save['files']} files, {save['bytes']} bytes (unsigned zone)")
    lines.append("skills (index data from acx_skill, an unsigned cache bound to SKILL.md digests):")
    index = doc["skillIndex"]
    assert isinstance(index, list)
    for item in index:
        lines.append(f"  {item['name']}  {item['sqlarPath']}")
        lines.append(f"    {item['description']}")
    if not index:
        lines.append("  (none)")
    return "\n".join(printable(line) for line in lines) + "\n"
