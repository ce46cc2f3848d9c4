"""The kernel's table of mounts, read as it writes it, and the acxfs mounts in it.

Invariant: /proc/mounts is read as bytes and split only on the single spaces and newlines
the kernel writes, its octal escapes undone, so a mountpoint holding any other byte is
reported as the path it is; a mountpoint is compared in the form the kernel shows it
(`canonical`: its parents resolved, never itself, so no path inside a live mount is
resolved from that mount's own daemon).
"""

from __future__ import annotations

import os

FSTYPE = "fuse.acxfs"


_OCTAL = frozenset(b"01234567")


def _unescape(field: bytes) -> str:
    """A /proc/mounts field: octal escapes (the kernel writes space, tab, newline and
    backslash as \\ooo) undone, then decoded as the file system would (surrogateescape).
    A backslash not followed by three octal digits is kept as it is."""
    out, i = bytearray(), 0
    while i < len(field):
        digits = field[i + 1 : i + 4]
        if field[i] == 0x5C and len(digits) == 3 and all(d in _OCTAL for d in digits):
            out.append(int(digits, 8) & 0xFF)
            i += 4
        else:
            out.append(field[i])
            i += 1
    return os.fsdecode(bytes(out))


def parse_mounts(data: bytes) -> list[tuple[str, str, str, str]]:
    """(source, mountpoint, type, options) of every row of a /proc/mounts text, split only
    on the single spaces and newlines the kernel writes: a mountpoint may hold any other
    byte, including ones Python's str.split() or a UTF-8 decoder would trip over."""
    rows = []
    for line in data.split(b"\n"):
        parts = line.split(b" ")
        if len(parts) >= 4:
            rows.append((_unescape(parts[0]), _unescape(parts[1]), _unescape(parts[2]),
                         _unescape(parts[3])))
    return rows


def proc_mounts() -> list[tuple[str, str, str, str]]:
    """(source, mountpoint, type, options) of every mount, read as bytes."""
    try:
        with open("/proc/mounts", "rb") as handle:
            data = handle.read()
    except OSError:
        return []
    return parse_mounts(data)


def live_mounts() -> list[tuple[str, str]]:
    """(fsname, mountpoint) of every acxfs mount in /proc/mounts."""
    return [(source, point) for source, point, kind, _ in proc_mounts() if kind == FSTYPE]


def mount_owner(mountpoint: str) -> int | None:
    """The uid FUSE records for the mount at `mountpoint` (its `user_id=` option)."""
    wanted = canonical(mountpoint)
    for _, point, kind, options in proc_mounts():
        if kind == FSTYPE and point == wanted:
            for option in options.split(","):
                if option.startswith("user_id=") and option[8:].isdigit():
                    return int(option[8:])
    return None


def canonical(mountpoint: str) -> str:
    """The mountpoint as /proc/mounts shows it, resolving its parents but never itself."""
    absolute = os.path.abspath(mountpoint)
    return os.path.join(os.path.realpath(os.path.dirname(absolute)), os.path.basename(absolute))


def is_mounted(mountpoint: str) -> bool:
    real = canonical(mountpoint)
    return any(point == real for _, point, _, _ in proc_mounts())
