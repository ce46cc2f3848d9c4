"""Semantic Versioning 2.0.0: parsing and precedence.

Invariant: `parse` accepts exactly the grammar of semver.org 2.0.0 (its Backus-Naur form:
no leading zeros in numeric identifiers, no empty identifier, ASCII only), at most
`MAX_LENGTH` characters, and nothing else; two `Version`s compare, and are equal, exactly by
the spec's precedence: major, minor and patch numerically; a pre-release below its release;
pre-release identifiers left to right, numeric ones numerically and below alphanumeric ones,
alphanumeric ones in ASCII order, and with all preceding ones equal the longer list higher;
build metadata never counts.  `Version.text` keeps the text as written, for display.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from acxfs.errors import VersionError
from acxfs.text import printable

MAX_LENGTH = 256  # characters; a version becomes a path segment and a line of output

_NUMBER = r"(?:0|[1-9][0-9]*)"
_PRE_IDENT = r"(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
_BUILD_IDENT = r"[0-9A-Za-z-]+"
_GRAMMAR = re.compile(
    rf"(?P<major>{_NUMBER})\.(?P<minor>{_NUMBER})\.(?P<patch>{_NUMBER})"
    rf"(?:-(?P<pre>{_PRE_IDENT}(?:\.{_PRE_IDENT})*))?"
    rf"(?:\+(?P<build>{_BUILD_IDENT}(?:\.{_BUILD_IDENT})*))?"
)

Identifier = int | str
# A pre-release identifier's place in the order: numeric ones (0, n, "") before
# alphanumeric ones (1, 0, s); a release sorts after every pre-release of it.
_IdentKey = tuple[int, int, str]
_Key = tuple[int, int, int, int, tuple[_IdentKey, ...]]


def _ident_key(ident: Identifier) -> _IdentKey:
    return (0, ident, "") if isinstance(ident, int) else (1, 0, ident)


@functools.total_ordering
@dataclass(frozen=True, eq=False)
class Version:
    """A parsed version; ordered and compared by SemVer precedence (build metadata ignored,
    so `1.0.0+a == 1.0.0+b`), hashed consistently with that equality."""

    major: int
    minor: int
    patch: int
    prerelease: tuple[Identifier, ...] = ()
    build: tuple[str, ...] = ()
    text: str = field(default="", compare=False)

    @property
    def key(self) -> _Key:
        """The precedence as a tuple: versions compare exactly as their keys do."""
        released = 0 if self.prerelease else 1
        return (self.major, self.minor, self.patch, released,
                tuple(_ident_key(i) for i in self.prerelease))

    @property
    def is_prerelease(self) -> bool:
        return bool(self.prerelease)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Version({self.text!r})"

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self.key == other.key

    def __lt__(self, other: Version) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self.key < other.key


def _why_not(text: str) -> str:
    """The first rule `text` breaks, for the error line."""
    core, _, build = text.partition("+")
    core, dash, pre = core.partition("-")
    numbers = core.split(".")
    if len(numbers) != 3 or not all(n.isascii() and n.isdigit() for n in numbers):
        return "expected MAJOR.MINOR.PATCH, three numbers"
    if any(len(n) > 1 and n.startswith("0") for n in numbers):
        return "a number has a leading zero"
    if dash and not pre:
        return "the pre-release after '-' is empty"
    if "+" in text and not build:
        return "the build metadata after '+' is empty"
    for ident in (pre.split(".") if pre else []):
        if not ident:
            return "a pre-release identifier is empty"
        if ident.isascii() and ident.isdigit() and len(ident) > 1 and ident.startswith("0"):
            return "a numeric pre-release identifier has a leading zero"
    for ident in (build.split(".") if build else []):
        if not ident:
            return "a build metadata identifier is empty"
    return "only ASCII letters, digits and '-' may form identifiers"


def parse(text: str) -> Version:
    """The version `text` names (`VersionError`, one line, if it is not SemVer 2.0.0)."""
    if not isinstance(text, str):
        raise VersionError(f"not a version: {type(text).__name__}, not text")
    if len(text) > MAX_LENGTH:
        raise VersionError(f"not a SemVer 2.0.0 version: longer than {MAX_LENGTH} characters")
    found = _GRAMMAR.fullmatch(text)
    if found is None:
        raise VersionError(f"not a SemVer 2.0.0 version: {printable(text)!r} "
                           f"({_why_not(text)})")
    pre = found.group("pre")
    build = found.group("build")
    return Version(
        int(found.group("major")), int(found.group("minor")), int(found.group("patch")),
        tuple(int(i) if i.isdigit() else i for i in pre.split(".")) if pre else (),
        tuple(build.split(".")) if build else (),
        text,
    )


def is_semver(text: str) -> bool:
    """Whether `parse(text)` accepts it."""
    try:
        parse(text)
    except VersionError:
        return False
    return True
