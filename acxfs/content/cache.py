"""The verified-bytes cache every source of a process reads through.

`VerifiedCache` adds a byte-bounded cache to the verification rule (`acxfs.content.rule`) and
makes concurrent readers of one file share one verification; a process has one
(`process_cache`), shared by every Source it opens and keyed per source.

Invariant: the cache hands out only blobs `rule.verify_content` returned; a file that failed
its check stays failed for the life of its source.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator

from acxfs.container import Entry, SourceStats, VerifiedBlob
from acxfs.content import rule
from acxfs.content.rule import MemoryBlob
from acxfs.errors import EnvironmentProblem, TamperError, UnverifiableError
from acxfs.limits import DEFAULT_LIMITS, Limits


class _Flight:
    """One verification in progress: those who asked for the same file meanwhile wait here."""

    __slots__ = ("_blob", "_done", "_error")

    def __init__(self) -> None:
        self._done = threading.Lock()
        self._done.acquire()  # released when the outcome is known
        self._blob: VerifiedBlob | None = None
        self._error: BaseException | None = None

    def succeed(self, blob: VerifiedBlob) -> None:
        self._blob = blob
        self._done.release()

    def fail(self, error: BaseException) -> None:
        # Kept without its traceback: that would hold the failed verification's frames, and
        # with them its inflated bytes and its open BLOB stream, for as long as it is kept.
        self._error = error.with_traceback(None)
        self._done.release()

    def outcome(self) -> VerifiedBlob:
        with self._done:
            pass
        if self._blob is not None:
            return self._blob
        error = self._error
        if isinstance(error, TamperError):
            raise TamperError(str(error), error.path) from error
        if isinstance(error, EnvironmentProblem):
            raise EnvironmentProblem(str(error)) from error
        raise RuntimeError(f"the verification this read waited for failed ({error!r})") from error


class VerifiedCache:
    """Verified blobs of every source of a process: a byte-bounded LRU cache with one
    verification per file at a time, and one budget of bytes verified at once.

    A process makes one store and hands it to every Source it opens (`process_cache`), so a
    daemon serving many bundles keeps one cache and one in-flight bound.  Its maps are keyed
    by (source key, path): a Source passes itself as `key` and calls `forget(self)` when it
    closes.  `on_tamper(key, error)` is told of each failed check once (reporting never
    breaks serving); `stats` counts for the whole process."""

    def __init__(
        self,
        limits: Limits = DEFAULT_LIMITS,
        spill_dir: str | None = None,
        on_tamper: Callable[[object, TamperError], None] | None = None,
    ) -> None:
        self._limits = limits
        self.stats = SourceStats()
        self._spill_dir = spill_dir
        self.on_tamper = on_tamper
        self._cache: OrderedDict[tuple[object, str], VerifiedBlob] = OrderedDict()
        self._spilled: OrderedDict[tuple[object, str], None] = OrderedDict()
        self._cached_bytes = 0
        self._lock = threading.Lock()
        self._flights: dict[tuple[object, str], _Flight] = {}
        self._failed: dict[tuple[object, str], TamperError] = {}
        self._inflight = 0  # bytes being verified right now, bounded by limits.inflight_bytes
        # Kept for files verified in memory (16 of them at the largest, or half the budget).
        self._small_room = min(limits.inflight_bytes // 2, 16 * limits.memory_spill_bytes)
        self._room = threading.Condition(self._lock)
        self._waiting = 0  # readers waiting for room (notified only when there are some)

    def get(
        self, key: object, entry: Entry, open_chunks: Callable[[Entry], Iterator[bytes]]
    ) -> VerifiedBlob:
        """The verified bytes of `entry` of the source `key`, whose stored bytes
        `open_chunks(entry)` yields (raises TamperError; never returns unverified bytes).

        The first caller for a file verifies it; callers arriving meanwhile wait for that one
        verification and share its outcome, blob or error.  A file that failed its check stays
        failed: later reads get the same TamperError without another attempt (the kernel
        retries a failed read, and one tampered file is one tamper event)."""
        path = entry.path
        if entry.is_dir or entry.digest is None:
            raise UnverifiableError(f"{path} has no recorded digest: it cannot be verified", path)
        slot = (key, path)
        with self._lock:
            blob = self._cache.get(slot)
            if blob is not None:
                self._cache.move_to_end(slot)
                self.stats.cache_hits += 1
                return blob
            failed = self._failed.get(slot)
            if failed is not None:
                raise TamperError(str(failed), path)
            flight = self._flights.get(slot)
            if flight is None:
                flight = self._flights[slot] = _Flight()
                self.stats.cache_misses += 1
                weight = self._weight(entry.size)
                while self._inflight and self._inflight + weight > self._limits.inflight_bytes:
                    self._waiting += 1
                    try:
                        self._room.wait()
                    finally:
                        self._waiting -= 1
                self._inflight += weight
                leader = True
            else:
                leader = False
        if not leader:
            return flight.outcome()
        try:
            blob = rule.verify_content(entry, lambda: open_chunks(entry), self._limits,
                                       self._spill_dir)
        except BaseException as exc:
            tamper = exc if isinstance(exc, TamperError) else None
            self._land(slot, flight, weight, None, tamper)
            flight.fail(exc)  # first: readers waiting on this check must wake whatever follows
            on_tamper = self.on_tamper
            if tamper is not None and on_tamper is not None:
                with contextlib.suppress(Exception):  # reporting never breaks serving
                    on_tamper(key, tamper)
            raise
        self._land(slot, flight, weight, blob, None)
        flight.succeed(blob)
        return blob

    def _weight(self, size: int) -> int:
        """What verifying a file of `size` bytes counts against the budget of bytes verified
        at once: its size, but for a large file at most the budget less the room kept for
        files verified in memory, so one large file cannot hold up every small read."""
        limit = self._limits.inflight_bytes
        return min(size, limit if size <= self._limits.memory_spill_bytes
                   else limit - self._small_room)

    def _land(self, slot: tuple[object, str], flight: _Flight, weight: int,
              blob: VerifiedBlob | None, tamper: TamperError | None) -> None:
        """End one verification: free its weight, then cache its blob or record its failure
        (under one lock, so no later reader can start a second check of a failed file)."""
        with self._lock:
            if self._flights.get(slot) is flight:
                del self._flights[slot]
            self._inflight -= weight
            if self._waiting:
                self._room.notify_all()
            if blob is not None:
                self.stats.blobs_inflated += 1 if blob.size else 0  # an empty file inflates nothing
                self.stats.bytes_verified += blob.size
                self._insert(slot, blob)
            elif tamper is not None:
                self.stats.tamper_events += 1
                # A fresh error, with no traceback and no chained cause: the failure is kept for
                # the life of the mount, its frames (inflated bytes, an open SQLite connection)
                # must not be.
                self._failed[slot] = TamperError(str(tamper), tamper.path)

    def _insert(self, slot: tuple[object, str], blob: VerifiedBlob) -> None:
        self._cache[slot] = blob
        if isinstance(blob, MemoryBlob):
            self._cached_bytes += blob.size
        else:
            # Spilled blobs cost a descriptor and disk, not memory: keep the newest few.
            self._spilled[slot] = None
            while len(self._spilled) > 8:
                stale, _ = self._spilled.popitem(last=False)
                self._cache.pop(stale, None)  # closed once no open handle holds it
        while self._cached_bytes > self._limits.cache_bytes and len(self._cache) > 1:
            evicted_slot, evicted = self._cache.popitem(last=False)
            self._dropped(evicted_slot, evicted)

    def _dropped(self, slot: tuple[object, str], blob: VerifiedBlob) -> None:
        """Account for a blob taken out of the cache (closed once no open handle holds it)."""
        if isinstance(blob, MemoryBlob):
            self._cached_bytes -= blob.size
        else:
            self._spilled.pop(slot, None)

    def forget(self, key: object) -> None:
        """Drop the cached blobs and recorded failures of the source `key` (it closed)."""
        with self._lock:
            for slot in [s for s in self._cache if s[0] is key]:
                self._dropped(slot, self._cache.pop(slot))
            for slot in [s for s in self._failed if s[0] is key]:
                del self._failed[slot]


_PROCESS_CACHE: list[VerifiedCache] = []
_PROCESS_LOCK = threading.Lock()


def process_cache(limits: Limits = DEFAULT_LIMITS) -> VerifiedCache:
    """The process's one store, made on first use with `limits` (later calls get the same
    store: its cache and in-flight bounds are the process's).  A daemon that must log tamper
    events sets `process_cache().on_tamper`."""
    with _PROCESS_LOCK:
        if not _PROCESS_CACHE:
            _PROCESS_CACHE.append(VerifiedCache(limits))
        return _PROCESS_CACHE[0]
