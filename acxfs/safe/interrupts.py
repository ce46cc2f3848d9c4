"""Stopping a command that writes files at a point where its clean-up is whole.

Invariant: inside `stop_like_ctrl_c`, SIGINT, SIGTERM and SIGHUP (each unless it is ignored,
as `nohup` leaves SIGHUP) raise nothing where they land.  The first one only records that
the command is to stop and makes all of them ignored from then on; `checkpoint()`, which the
writers call between their steps (between files, between chunks of one, before a commit),
then raises KeyboardInterrupt, and the writers' clean-up runs from there.  An exception raised
by a signal handler lands between any two bytecodes: after `os.close(fd)` but before `fd` is
forgotten, a clean-up closes that descriptor a second time (another file's, once the number
is reused), or it stops half-way and leaves a temporary file behind; and a second signal
arriving while the first handler runs would raise again inside the clean-up.  A stop asked
for after the last checkpoint lets the command finish: what it wrote is whole.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _Stop:
    requested = False  # a signal arrived since `stop_like_ctrl_c` began
    handled: tuple[int, ...] = ()  # the signals it handles (the others stay ignored)


def checkpoint() -> None:
    """Raise KeyboardInterrupt if a stop was asked for: the caller can stop whole here."""
    if _Stop.requested:
        raise KeyboardInterrupt


def _request(signum: int, frame: FrameType | None) -> None:
    del signum, frame
    _Stop.requested = True
    for sig in _Stop.handled:  # once: nothing may interrupt the clean-up or the exit
        signal.signal(sig, signal.SIG_IGN)


@contextlib.contextmanager
def stop_like_ctrl_c() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP stop the command at its next `checkpoint()`, as Ctrl-C
    would, so its clean-up runs (their default action would leave its temporary file or
    directory behind).  Once one came, they stay ignored: the command is ending."""
    handled = tuple(sig for sig in _SIGNALS
                    if signal.getsignal(sig) is not signal.SIG_IGN)  # nohup's choice stands
    _Stop.requested, _Stop.handled = False, handled
    previous = {sig: signal.signal(sig, _request) for sig in handled}
    try:
        yield
    finally:
        if not _Stop.requested:  # (one arriving now is ignored: the command finished)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        _Stop.requested, _Stop.handled = False, ()
