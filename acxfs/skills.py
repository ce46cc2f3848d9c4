"""Agent Skills (agentskills.io) frontmatter rules and the derived `acx_skill` index row.

`parse_skill` accepts SKILL.md bytes and returns a `SkillInfo` only when the frontmatter
follows the rules of spec section 8 for the directory it lives in; otherwise SkillError says
which rule broke.  `index_row` derives the acx_skill values from verified bytes alone.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from acxfs.errors import SkillError

NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
ALLOWED_KEYS = frozenset(
    {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
)
RESOURCE_DIRS = ("references", "scripts", "assets")
SCHEMA_VERSION = "acx.skill/1"


@dataclass(frozen=True)
class SkillInfo:
    name: str
    description: str
    license: str | None
    compatibility: str | None
    version: str | None


def valid_name(name: str) -> bool:
    """The Agent Skills name rule: 1-64 of a-z, 0-9 and single hyphens."""
    return 1 <= len(name) <= 64 and NAME_RE.fullmatch(name) is not None


def skill_dirs(names: Iterable[str], root: str) -> dict[str, str]:
    """Skill name -> its directory under `root`, for names taken from a verified tree;
    SkillError for a name that breaks the Agent Skills rule."""
    found: dict[str, str] = {}
    for name in names:
        if not valid_name(name):
            raise SkillError(f"skill directory {name!r} is not a valid skill name (1-64 of "
                             "a-z, 0-9 and single hyphens)")
        found[name] = f"{root}/{name}"
    return found


def split_frontmatter(text: str) -> str:
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise SkillError("SKILL.md does not start with a '---' frontmatter line")
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return "\n".join(lines[1:i])
    raise SkillError("SKILL.md frontmatter has no closing '---' line")


def parse_skill(data: bytes, directory: str) -> SkillInfo:
    """The frontmatter of a SKILL.md stored in `<...>/<directory>/SKILL.md`, checked."""
    import yaml  # here, not with the module: the commands that read no SKILL.md skip loading it

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillError("SKILL.md is not UTF-8") from exc
    try:
        doc = yaml.safe_load(split_frontmatter(text))
    except yaml.YAMLError as exc:
        raise SkillError(f"SKILL.md frontmatter is not YAML ({exc.__class__.__name__})") from exc
    if not isinstance(doc, dict):
        raise SkillError("SKILL.md frontmatter is not a mapping")
    unknown = sorted(str(k) for k in doc if k not in ALLOWED_KEYS)
    if unknown:
        raise SkillError(f"SKILL.md frontmatter has unknown key {unknown[0]!r}")
    name, description = doc.get("name"), doc.get("description")
    if not isinstance(name, str) or not valid_name(name):
        raise SkillError(f"skill name {name!r} must be 1-64 of a-z, 0-9 and single hyphens")
    if name != directory:
        raise SkillError(f"skill name {name!r} differs from its directory {directory!r}")
    if not isinstance(description, str) or not 1 <= len(description) <= 1024:
        raise SkillError("skill description must be a string of 1-1024 characters")
    compat = doc.get("compatibility")
    if compat is not None and (not isinstance(compat, str) or not 1 <= len(compat) <= 500):
        raise SkillError("skill compatibility must be a string of 1-500 characters")
    lic = doc.get("license")
    if lic is not None and not isinstance(lic, str):
        raise SkillError("skill license must be a string")
    metadata = doc.get("metadata")
    if metadata is not None and (
        not isinstance(metadata, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())
    ):
        raise SkillError("skill metadata must map strings to strings")
    version = metadata.get("version") if isinstance(metadata, dict) else None
    return SkillInfo(name, description, lic, compat, version)


@dataclass(frozen=True, slots=True)
class IndexRow:
    """An `acx_skill` row: derived by `index_row` when packing, read back as an unsigned
    cache (never a verified fact) when checking."""

    sqlar_path: str
    name: str
    description: str
    license: str | None
    compatibility: str | None
    skill_version: str | None
    body_tokens: int | None
    content_sha256: str
    resources: str
    ext: str | None
    schema_version: str | None = SCHEMA_VERSION


def index_row(skill_path: str, data: bytes, resources: dict[str, bytes]) -> IndexRow:
    """The acx_skill row for `skill_path` (…/<dir>/SKILL.md) and its resource files' bytes."""
    directory = skill_path.rsplit("/", 2)[-2]
    info = parse_skill(data, directory)
    listed = [
        {"path": path, "bytes": len(body), "sha256": hashlib.sha256(body).hexdigest()}
        for path, body in sorted(resources.items())
    ]
    return IndexRow(
        sqlar_path=skill_path,
        name=info.name,
        description=info.description,
        license=info.license,
        compatibility=info.compatibility,
        skill_version=info.version,
        body_tokens=math.ceil(len(data) / 4),
        content_sha256=hashlib.sha256(data).hexdigest(),
        resources=json.dumps(listed, separators=(",", ":"), ensure_ascii=False),
        ext=None,
    )


def is_resource(skill_dir: str, path: str) -> bool:
    """Whether `path` lies under references/, scripts/ or assets/ of `skill_dir`."""
    rest = path.removeprefix(skill_dir + "/")
    return rest != path and rest.split("/", 1)[0] in RESOURCE_DIRS and "/" in rest
