"""Keep one Python thread state per libfuse worker thread instead of one per request.

libfuse2's multi-threaded loop calls into Python from its own native worker threads.  For a
thread Python has never seen, every ctypes callback creates a thread state on entry and
destroys it on return; that set-up is most of what a small request costs (measured in
docs/performance.md: a cold walk of 10k files through a do-nothing filesystem took 2.6 s
with it, 1.7 s without).  `pin_current_thread` takes one extra reference on the current
thread's state, so later callbacks on the same worker reuse it.

Invariant: at most `MAX_PINNED` thread states are ever pinned.  A pinned state outlives its
worker if libfuse retires that thread (it keeps up to 10 idle workers), so the bound is also
the bound on what that can leak (a few tens of KiB each); threads past it run unpinned,
correct and only slower.
"""

from __future__ import annotations

import ctypes
import threading

MAX_PINNED = 64

_local = threading.local()
_lock = threading.Lock()
_pinned = 0


def pin_current_thread() -> None:
    """Make the calling thread's Python thread state outlive the current callback."""
    global _pinned
    if getattr(_local, "seen", False):
        return
    _local.seen = True
    with _lock:
        if _pinned >= MAX_PINNED:
            return
        _pinned += 1
    # The GIL is held here, so this only raises the state's use count; ctypes' release at the
    # end of the callback then leaves the state in place.
    ctypes.pythonapi.PyGILState_Ensure()
