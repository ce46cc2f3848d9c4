"""Agent directories served whole: what each one shows, and the name it is served under.

An agent directory the library owns outright (`acxfs layout whole`) is not a directory of
per-skill links but one link itself, to a view the daemon serves right below its mountpoint:
`mnt/@<view>/<skill>/` is the skill's directory in its served revision, a real directory of
the mount (no link an agent has to resolve, no parent of each skill's own to probe).

Invariant: a view's name is a digest of what it shows (each skill name and the revision path
it shows), so, like a served name, the same view path always means the same verified bytes
and the kernel may keep what it learnt of it; a change of the directory is a new view and a
re-pointed link, never a changed one.  A view may show less than its name says, never
anything else: a skill whose revision the daemon does not serve (its signer no longer
trusted, its release pulled) is not in it.  What a view shows is worked out from the state
alone, here, by the library and the daemon alike.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from acxfs.library.links.agent_links import Link

MARK = "@"  # a view's name starts with it; a served name never does
DIGITS = 20  # hex digits of the digest in a view's name (80 bits)


def is_view_name(name: str) -> bool:
    digest = name[len(MARK):]
    return name.startswith(MARK) and len(digest) == DIGITS and all(
        c in "0123456789abcdef" for c in digest)


def view_target_problem(mnt: str, value: str) -> str | None:
    """Why `value` is not the path of a view right below the mountpoint `mnt`."""
    parent, name = os.path.split(value)
    if parent == mnt and is_view_name(name):
        return None
    return f"not a view of the library's mountpoint {mnt}"


def shown(links: list[Link], directory: str) -> dict[str, str]:
    """What the view of `directory` shows: skill name -> the skill's path in the mount, for
    every link the library records there (the links of an agent directory served whole are
    recorded, not made)."""
    return {link.name: link.target for link in links if link.directory == directory}


def view_name(content: dict[str, str]) -> str:
    """The name the view showing `content` is served under."""
    digest = hashlib.sha256()
    for name in sorted(content):
        digest.update(f"{name}\0{content[name]}\n".encode())
    return MARK + digest.hexdigest()[:DIGITS]


def view_target(mnt: Path, links: list[Link], directory: str) -> str:
    """Where the link that is `directory` points: its view, right below the mountpoint."""
    return str(mnt / view_name(shown(links, directory)))


def served_paths(content: dict[str, str], mnt: Path) -> dict[str, tuple[str, str]]:
    """For the daemon: each skill of a view's content as (served name, path below it), only
    the skills whose recorded path lies in a revision of this mountpoint."""
    below: dict[str, tuple[str, str]] = {}
    for name, path in content.items():
        rel = os.path.relpath(path, mnt)
        served, _, inside = rel.partition("/")
        if served and inside and not rel.startswith("..") and not is_view_name(served):
            below[name] = (served, inside)
    return below
