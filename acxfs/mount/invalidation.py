"""Telling the kernel which of its cached entries a change of the served set made stale.

A mount that serves a changing set of sources (the library's daemon) lets the kernel cache
every entry, attribute, negative lookup and directory listing for long: what is under a
source's prefix never changes while it is served.  Only the made-up directories that lead to
the prefixes change, when a source is attached or detached, and for each such change
`KernelNotifier.changed` sends the kernel, through libfuse's low-level notify calls, one entry
invalidation per name that came or went (a positive entry of a detached source, and with it
every entry below it; a negative entry of an attached one) and an inode invalidation of the
directory itself (its attributes and its cached listing).

Invariant: once `changed` returns, no lookup through the mount finds a name the new layout does
not have, or misses one it has.  The kernel holds a directory's lock while a lookup in it is
answered and takes it again for the invalidation, so a lookup answered from the old layout is
cached before the invalidation and dropped by it.  `available` says whether the library loaded
has the notify calls; a mount must not cache for long without them.

The high-level libfuse API names nodes by path, while the notify calls take the kernel's node
ids; without `use_ino` the inode number of a path in the mount is its node id (and the
low-level binding makes it so), so the id of a made-up directory is read with an lstat of it
through the mount (a lookup, if the kernel had
none, answered by another worker thread: `changed` never runs in a FUSE request).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
from collections.abc import Mapping
from typing import Any

from acxfs.mount.lowlevel import session_in_init

ROOT_ID = 1  # FUSE_ROOT_ID: the node id of the mount's root
NOTIFY_CALLS = ("fuse_get_session", "fuse_lowlevel_notify_inval_entry",
                "fuse_lowlevel_notify_inval_inode")


LIBFUSE3 = ("libfuse3", "libfuse3-lowlevel")  # the backends over libfuse3 (through mfusepy)


def library_of(backend: str) -> Any:
    """The ctypes handle of the libfuse the binding of `backend` loaded (None if not loaded)."""
    loaded = sys.modules.get("mfusepy" if backend in LIBFUSE3 else "fuse")
    return getattr(loaded, "_libfuse", None)


def available(backend: str) -> bool:
    """Whether the libfuse of `backend` (loaded already) has every notify call used here."""
    lib = library_of(backend)
    names = (*NOTIFY_CALLS, *(() if backend in LIBFUSE3 else ("fuse_session_next_chan",)))
    return lib is not None and all(hasattr(lib, name) for name in names)


class KernelNotifier:
    """The notify calls of one mount, usable from any thread once `capture` ran in its init."""

    def __init__(self, backend: str, mountpoint: str) -> None:
        self.backend = backend
        self.mountpoint = mountpoint
        self._lib: Any = None
        self._target: ctypes.c_void_p | None = None  # libfuse3: the session; 2: its channel
        self._lock = threading.Lock()

    def capture(self) -> None:
        """Take the session of the mount whose FUSE callback is running on this thread."""
        if not available(self.backend):
            return
        lib = library_of(self.backend)
        if self.backend == "libfuse3-lowlevel":
            target = session_in_init()  # the low-level binding names its session itself
        else:
            context = lib.fuse_get_context()
            if not context or not context.contents.fuse:
                return
            lib.fuse_get_session.restype = ctypes.c_void_p
            lib.fuse_get_session.argtypes = [ctypes.c_void_p]
            target = lib.fuse_get_session(ctypes.c_void_p(context.contents.fuse))
        if target and self.backend not in LIBFUSE3:
            lib.fuse_session_next_chan.restype = ctypes.c_void_p
            lib.fuse_session_next_chan.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
            target = lib.fuse_session_next_chan(ctypes.c_void_p(target), None)
        if not target:
            return
        lib.fuse_lowlevel_notify_inval_entry.restype = ctypes.c_int
        lib.fuse_lowlevel_notify_inval_entry.argtypes = [
            ctypes.c_void_p, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t]
        lib.fuse_lowlevel_notify_inval_inode.restype = ctypes.c_int
        lib.fuse_lowlevel_notify_inval_inode.argtypes = [
            ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int64, ctypes.c_int64]
        self._lib, self._target = lib, ctypes.c_void_p(target)

    def release(self) -> None:
        """The session is going away (unmount): send nothing from now on."""
        with self._lock:
            self._target = None

    def _node(self, directory: str) -> int | None:
        """The node id of the made-up directory `directory` (None: the kernel cannot have
        anything cached below it, as it is not there)."""
        if not directory:
            return ROOT_ID
        try:
            return os.lstat(os.path.join(self.mountpoint, directory)).st_ino
        except OSError:
            return None

    def changed(self, before: Mapping[str, tuple[str, ...]],
                after: Mapping[str, tuple[str, ...]]) -> None:
        """The made-up directories went from `before` to `after` (directory -> the names in
        it): drop what the kernel caches of every name that came or went, and the attributes
        and listings of the directories holding them."""
        if self._target is None:
            return
        for directory in sorted(set(before) & set(after)):
            old, new = set(before[directory]), set(after[directory])
            if old == new:
                continue
            node = self._node(directory)
            if node is None:
                continue
            for name in sorted(old ^ new):
                raw = os.fsencode(name)
                self._send("fuse_lowlevel_notify_inval_entry", node, raw, len(raw))
            self._send("fuse_lowlevel_notify_inval_inode", node, 0, 0)

    def _send(self, call: str, *args: object) -> None:
        """One notification (its answer, -ENOENT when the kernel held nothing, is moot)."""
        with self._lock:
            if self._target is not None:
                with contextlib.suppress(OSError):
                    getattr(self._lib, call)(self._target, *args)
