"""What a mount or a read shows of a verified tree: the view's root and the path a user meant.

Invariant: every choice here is made from the paths of the source's verified tree alone (never
from an index or other unsigned data), and nothing is read, written or printed: a choice the
user should hear about comes back as a note for the caller to show.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from acxfs.container import Entry, Source
from acxfs.errors import EnvironmentProblem


@dataclass(frozen=True)
class View:
    """A subtree to serve: `root` is its tree path ('' for the whole container), `name` what
    status and messages call it, `notes` what the user should be told about the choice."""

    root: str
    name: str
    notes: tuple[str, ...] = ()


def choose_view(
    source: Source, label: str, mountpoint: str, *, skill: str | None = None,
    skills: bool = False, root_view: bool = False,
) -> View:
    """The view a mount of `source` (named `label` in messages) on `mountpoint` serves: one
    skill (`skill`, or the mountpoint's name), the skills directory (`skills`), or the whole
    container (the default, and always with `root_view`)."""
    skills_root = source.skills_root
    offered = source.tree.skills(skills_root)
    if skill and skills:
        raise EnvironmentProblem("give --skill NAME or --skills, not both")
    if skill:
        if skill not in offered:
            raise EnvironmentProblem(
                f"no skill {skill!r} in {label}; it has: {', '.join(offered) or '(no skills)'}")
        return View(f"{skills_root}/{skill}", f"skill {skill}")
    if skills:
        if source.tree.lookup(skills_root) is None:
            raise EnvironmentProblem(f"{label} has no {skills_root}/ directory")
        return View(skills_root, "skills")
    name = os.path.basename(os.path.abspath(mountpoint))
    if name in offered and not root_view:
        return View(f"{skills_root}/{name}", f"skill {name}", (
            f"acxfs: mounting skill {name} (the mountpoint's name); "
            "use --skills or --root-view to mount otherwise",))
    parent = os.path.basename(os.path.dirname(os.path.abspath(mountpoint)))
    if parent == "skills" and not root_view:
        return View("", "container", (
            "acxfs: hint: this mountpoint is inside a skills/ directory; "
            "--skill NAME or --skills fits agent runtimes better",))
    return View("", "container")


def skill_root(source: Source, label: str, skill: str | None) -> str:
    """The tree path of the skill `skill` of `source` ('' for the whole container when
    `skill` is None); EnvironmentProblem naming the skills it has otherwise."""
    if not skill:
        return ""
    offered = source.tree.skills(source.skills_root)
    if skill not in offered:
        raise EnvironmentProblem(f"no skill {skill!r} in {label} "
                                 f"(skills: {', '.join(offered) or 'none'})")
    return f"{source.skills_root}/{skill}"


def resolve(source: Source, path: str) -> tuple[str, Entry]:
    """The tree path a user meant by `path` and its verified entry.  A path missing from the
    tree that starts with neither `rom` nor `skills` is also looked up under `rom/`, a
    cartridge's signed zone, when the tree has one."""
    path = path.strip("/")
    tree = source.tree
    entry = tree.lookup(path)
    if entry is None and path and not path.startswith(("rom", "skills")):
        prefix = "rom/" if tree.lookup("rom") else ""
        found = tree.lookup(prefix + path)
        if found is not None:
            return prefix + path, found
    if entry is None:
        raise EnvironmentProblem(f"{path or '/'}: no such file or directory in the container")
    return path, entry
