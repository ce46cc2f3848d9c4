"""The last parse of one of the library's own files, kept for the daemon's next read of it.

Invariant: `LastRead.of(data)` is `parse(data)` for the very bytes `data`; a value parsed from
other bytes is never returned.  Its readers never change a parsed value.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class LastRead(Generic[T]):
    """What one of the library's own files (its state, its intent) held when last read,
    parsed: a sync reads both, and a change rewrites one at a time, so the other is not
    parsed again.  Its readers never change a parsed value."""

    def __init__(self, parse: Callable[[bytes], T]) -> None:
        self._parse = parse
        self._last: tuple[bytes, T] | None = None
        self._lock = threading.Lock()

    def of(self, data: bytes) -> T:
        """`parse(data)`, or what it returned when last given these very bytes."""
        with self._lock:
            last = self._last
        if last is not None and last[0] == data:
            return last[1]
        value = self._parse(data)
        with self._lock:
            self._last = (data, value)
        return value
