"""The manifest of an .azp package: its listing, the kind "skill" rules, compat, the tree.

Invariant: `check_listing` accepts only a manifest whose `files` names exactly the payload
entries, each with a sha256 digest; `build_package_tree` makes one entry per listed path
(a path is never both a file and a directory); `skill_problems` is the reference's
validateSkillManifest; `check_compat` refuses a package that needs another azphalt API.
"""

from __future__ import annotations

import re

from acxfs import verdict as v
from acxfs.container import Entry, Tree, build_tree
from acxfs.errors import Refused
from acxfs.formats.azp.zip import Member, tampered
from acxfs.safe import strict_json
from acxfs.text import printable

API_VERSION = (0, 1, 0)
API_VERSION_TEXT = "0.1"
MANIFEST = "manifest.json"
SIGNATURE = "signature.json"
RESERVED = frozenset({MANIFEST, SIGNATURE})
SKILLS_ROOT = "skills"

_DIGEST_RE = re.compile(r"sha256-([0-9a-f]{64})")
# Each version part at most COMPAT_DIGITS digits: int() refuses a string of over 4,300 digits
# with a ValueError, and no API version needs more than a few.
COMPAT_DIGITS = 9
COMPAT_SHOWN = 64  # characters of an unmet compat the verdict line quotes
_PART = f"([0-9]{{1,{COMPAT_DIGITS}}})"
_COMPAT_RE = re.compile(rf"\s*(>=|<=|>|<|=)?\s*{_PART}(?:\.{_PART})?(?:\.{_PART})?\s*")
_SAFE_ID_RE = re.compile(r"[^\s/\\\ufeff]+")


def parse_json_object(data: bytes, name: str) -> dict[str, object]:
    """A UTF-8 JSON object without duplicate keys or NaN/Infinity; ValueError otherwise."""
    try:
        doc = strict_json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ValueError(f"{name} is not valid JSON ({exc})") from exc
    if not isinstance(doc, dict):
        raise ValueError(f"{name} is not a JSON object")
    return doc


def check_listing(manifest: dict[str, object], members: dict[str, Member]) -> dict[str, bytes]:
    """`files` names exactly the payload entries, each with a sha256; returns the digests."""
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise tampered("manifest.files is missing or not an object")
    digests: dict[str, bytes] = {}
    for path, value in files.items():
        match = _DIGEST_RE.fullmatch(value) if isinstance(value, str) else None
        if match is None:
            raise tampered(f"manifest.files[{path!r}] is not a sha256- digest")
        if path in RESERVED:
            raise tampered(f"manifest.files lists the reserved name {path}")
        if path not in members:
            raise tampered(f"missing payload: {path!r} is listed but not in the package")
        digests[path] = bytes.fromhex(match.group(1))
    for name in members:
        if name not in RESERVED and name not in digests:
            raise tampered(f"unlisted payload: {name!r} has no digest in manifest.files")
    return digests


def _truthy(value: object) -> bool:
    """JavaScript truthiness, as the reference tests these fields."""
    if isinstance(value, float) and value != value:
        return False
    return value not in (None, False, 0, "")


def _skill_entry_problem(entry: object, seen: set[str], files: dict[str, bytes]) -> str | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or not entry["id"]:
        return "skill: every skill needs a non-empty id"
    skill_id: str = entry["id"]
    if skill_id in (".", "..") or not _SAFE_ID_RE.fullmatch(skill_id):
        return f"skill: id {skill_id!r} is not a directory-safe name"
    if skill_id in seen:
        return f"skill: duplicate id {skill_id!r}"
    seen.add(skill_id)
    if (path := f"{SKILLS_ROOT}/{skill_id}/SKILL.md") not in files:
        return f"skill: {path!r} is not in manifest.files"
    return None


def skill_problems(manifest: dict[str, object], files: dict[str, bytes]) -> list[str]:
    """validateSkillManifest: every rule a kind "skill" manifest breaks ([] when it holds)."""
    skill = manifest.get("skill")
    if not isinstance(skill, dict):
        return ['skill: kind "skill" requires a "skill" block']
    problems = [
        f"skill: a skill package must not declare {what}"
        for what, broken in (
            ("entry/runtime", _truthy(manifest.get("entry")) or _truthy(manifest.get("runtime"))),
            ("capabilities", manifest.get("capabilities") not in (None, [])),
            ("assets", manifest.get("assets") not in (None, [])),
            ("an app block", _truthy(manifest.get("app"))),
            ("an mcp block", _truthy(manifest.get("mcp"))),
            ("a pack block", _truthy(manifest.get("pack"))),
        )
        if broken
    ]
    entries = skill.get("skills")
    if not isinstance(entries, list) or not entries:
        return [*problems, "skill: at least one skill is required"]
    seen: set[str] = set()
    for entry in entries:
        problem = _skill_entry_problem(entry, seen, files)
        if problem is not None:
            problems.append(problem)
    return problems


def compat_satisfied(compat: str, host: tuple[int, int, int] = API_VERSION) -> bool:
    """The azphalt 0.1 compat grammar: one optional comparator (default >=) and a version
    (each part at most COMPAT_DIGITS digits: a longer one is not satisfied)."""
    match = _COMPAT_RE.fullmatch(compat)
    if match is None:
        return False
    op = match.group(1) or ">="
    want = tuple(int(part or 0) for part in match.group(2, 3, 4))
    results = {">=": host >= want, ">": host > want, "<=": host <= want, "<": host < want,
               "=": host == want}
    return results[op]


def check_compat(manifest: dict[str, object]) -> None:
    compat = manifest.get("compat")
    if compat is None:
        return
    if not isinstance(compat, str) or not compat_satisfied(compat):
        shown = repr(compat)
        if len(shown) > COMPAT_SHOWN:
            shown = f"{shown[:COMPAT_SHOWN]}... ({len(str(compat))} characters)"
        raise Refused(v.Verdict(
            "incompatible",
            f"Package requires azphalt API {shown}; acxfs implements {API_VERSION_TEXT}.",
        ))


def build_package_tree(members: dict[str, Member], digests: dict[str, bytes]) -> Tree:
    """The verified tree: one entry per listed path; a file may not also be a directory."""
    for path in digests:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            prefix = "/".join(parts[:depth])
            if prefix in digests:
                raise tampered(f"{prefix!r} is both a file and a directory")
    files = [
        Entry(
            path=path, is_dir=False, size=members[path].size, executable=False,
            mtime=members[path].mtime, digest=digest, ref=members[path].index,
            stored_size=members[path].stored_size, codec=members[path].codec,
        )
        for path, digest in digests.items()
    ]
    dir_mtime = max((f.mtime for f in files), default=0)
    return build_tree(files, (), dir_mtime)


def publisher_of(manifest: dict[str, object]) -> str | None:
    """Who the package speaks for: its `publisher` field, else its reverse-DNS `id`."""
    for key in ("publisher", "id"):
        value = manifest.get(key)
        if isinstance(value, str) and value:
            return printable(value)
    return None


def declared_skills(manifest: dict[str, object]) -> list[str]:
    """The ids of the manifest's skill block (whatever else the block holds)."""
    skill = manifest.get("skill")
    entries = skill.get("skills") if isinstance(skill, dict) else None
    if not isinstance(entries, list):
        return []
    return [e["id"] for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)]
