"""The only way file bytes leave a container: inflate within bounds, hash, then release.

`verify_content` consumes a file's stored bytes, inflates them (sqlar: one reading per row,
zlib whenever `uncompress()` with a `sz`-byte buffer accepts it, as `sqlite3 -Ax` reads it,
else raw DEFLATE; zip: raw DEFLATE or stored), never produces more than the entry's size, and
returns a `VerifiedBlob` only when the stream ended exactly at that size and its sha256
equals the signed digest.  Otherwise it raises `TamperError` naming the path.
Large files are accumulated in an unlinked temporary file, so memory stays bounded.
`VerifiedCache` adds a byte-bounded cache and makes concurrent readers of one file share one
verification; a process has one (`process_cache`), shared by every Source it opens and keyed
per source.  Only this module and the formats' deep checks call `verify_content`; only the
formats hand it stored bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import itertools
import os
import queue
import tempfile
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator

from acxfs.container import Entry, SourceStats, VerifiedBlob
from acxfs.errors import EnvironmentProblem, TamperError, UnverifiableError
from acxfs.limits import DEFAULT_LIMITS, Limits


class MemoryBlob:
    """Verified bytes held in memory."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self.size = len(data)

    def read(self, offset: int, length: int) -> bytes:
        return self._data[offset : offset + length]

    def close(self) -> None:
        self._data = b""


class SpilledBlob:
    """Verified bytes in an unlinked temporary file (read with pread, safe across threads)."""

    def __init__(self, fd: int, size: int) -> None:
        self._fd = fd
        self.size = size

    def read(self, offset: int, length: int) -> bytes:
        if offset >= self.size:
            return b""
        return os.pread(self._fd, min(length, self.size - offset), offset)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        self.close()


class _Sink:
    """Accumulates output in memory, then in an unlinked file past a threshold."""

    def __init__(self, size: int, threshold: int, spill_dir: str | None) -> None:
        self._mem = bytearray()
        self._file: int | None = None
        self._spill = size > threshold
        self._spill_dir = spill_dir
        self.written = 0

    def write(self, data: bytes) -> None:
        if not data:
            return
        self.written += len(data)
        if not self._spill:
            self._mem += data
            return
        if self._file is None:
            with tempfile.TemporaryFile(dir=self._spill_dir) as handle:
                self._file = os.dup(handle.fileno())
        view = memoryview(data)
        while view:
            view = view[os.write(self._file, view) :]

    def finish(self) -> VerifiedBlob:
        if self._file is None:
            return MemoryBlob(bytes(self._mem))
        blob = SpilledBlob(self._file, self.written)
        self._file = None
        return blob

    def discard(self) -> None:
        self._mem = bytearray()
        if self._file is not None:
            os.close(self._file)
            self._file = None


def looks_like_zlib(head: bytes) -> bool:
    """The RFC 1950 header test of the spec (section 3)."""
    if len(head) < 2:
        return False
    cmf, flg = head[0], head[1]
    return cmf & 0x0F == 8 and cmf >> 4 <= 7 and (cmf * 256 + flg) % 31 == 0 and not flg & 0x20


class _StreamError(Exception):
    """The stored bytes do not inflate to exactly `size` bytes under this codec."""


class _WrongSize(_StreamError):
    """Decoded to its end, short of `size`: for zlib, a row `uncompress()` accepts."""


PIPELINE_MIN_BYTES = 4 * 1024 * 1024  # files this large hash on a second thread
_PIPE_DEPTH = 4  # inflated pieces waiting for the hashing thread, at most


class _HashingThread:
    """Hashes and stores inflated pieces on its own thread while the caller inflates the next.

    zlib, sha256 and file writes all release the GIL, so on two cores a large file is checked
    in about the time of the slower half instead of the sum.  The queue holds at most
    `_PIPE_DEPTH` pieces, so memory stays bounded by the inflate step."""

    def __init__(self, sink: _Sink, hasher: hashlib._Hash) -> None:
        self._sink = sink
        self._hasher = hasher
        self._queue: queue.Queue[bytes | None] = queue.Queue(_PIPE_DEPTH)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="acxfs-hash", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (piece := self._queue.get()) is not None:
            if self._error is not None:
                continue  # drain until the producer stops
            try:
                self._hasher.update(piece)
                self._sink.write(piece)
            except BaseException as exc:  # reported to the producer at finish()
                self._error = exc

    def put(self, piece: bytes) -> None:
        if self._error is not None:
            raise self._error
        self._queue.put(piece)

    def finish(self) -> None:
        """Wait until every piece is hashed and stored; re-raise what failed on the thread."""
        self._queue.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error


def _inflate_into(
    chunks: Iterator[bytes], wbits: int | None, size: int, sink: _Sink, hasher: hashlib._Hash,
    step: int,
) -> None:
    """Inflate (or copy, wbits None) `chunks` into sink and hasher; exactly `size` bytes out."""
    if size < PIPELINE_MIN_BYTES:
        def consume(data: bytes) -> None:
            hasher.update(data)
            sink.write(data)

        _inflate_with(chunks, wbits, size, step, consume)
        return
    worker = _HashingThread(sink, hasher)
    try:
        _inflate_with(chunks, wbits, size, max(step, 1024 * 1024), worker.put)
    finally:
        worker.finish()


def _inflate_with(
    chunks: Iterator[bytes], wbits: int | None, size: int, step: int,
    consume: Callable[[bytes], object],
) -> None:
    """Inflate `chunks` in pieces of at most `step` bytes, each to `consume`; exactly `size`."""
    produced = 0

    def emit(data: bytes) -> None:
        nonlocal produced
        produced += len(data)
        if produced > size:
            raise _StreamError("inflates past its size")
        if data:
            consume(data)

    if wbits is None:
        for chunk in chunks:
            emit(chunk)
    else:
        inflater = zlib.decompressobj(wbits)
        try:
            for chunk in chunks:
                data = chunk
                while data and not inflater.eof:
                    emit(inflater.decompress(data, min(step, size - produced + 1)))
                    data = inflater.unconsumed_tail
                if inflater.eof:
                    break
            if not inflater.eof:
                emit(inflater.flush(size - produced + 1))
        except zlib.error as exc:
            raise _StreamError(f"does not inflate ({exc})") from exc
        if not inflater.eof:
            raise _StreamError("compressed stream is truncated")
    if produced != size:
        raise _WrongSize(f"yields {produced} bytes, not {size}")


def verify_content(
    entry: Entry,
    open_chunks: Callable[[], Iterator[bytes]],
    limits: Limits = DEFAULT_LIMITS,
    spill_dir: str | None = None,
) -> VerifiedBlob:
    """Inflate, bound and hash one file; return it only if its sha256 is the signed digest."""
    if entry.is_dir or entry.digest is None:
        raise TamperError(f"{entry.path} has no signed digest", entry.path)
    if entry.size > limits.max_file_bytes:
        raise TamperError(f"{entry.path} exceeds the per-file size limit", entry.path)
    if entry.stored_size <= SMALL_STORED_BYTES and entry.size <= limits.memory_spill_bytes:
        stored = _read_small(open_chunks(), entry.stored_size)
        if stored is not None:
            return _verify_small(entry, entry.digest, stored)
    opened: list[Iterator[bytes]] = []

    def open_stream() -> Iterator[bytes]:
        stream = open_chunks()
        opened.append(stream)
        return stream

    try:
        first: Iterator[bytes] | None = None
        head = b""
        if entry.codec == "sqlar" and entry.stored_size != entry.size:
            chunks = open_stream()
            head = next(chunks, b"")
            first = itertools.chain([head], chunks)  # the first attempt reuses this stream
        attempts = _codecs(entry, head)
        problem = ""
        for wbits in attempts:
            sink = _Sink(entry.size, limits.memory_spill_bytes, spill_dir)
            hasher = hashlib.sha256()
            stream, first = (first if first is not None else open_stream()), None
            try:
                _inflate_into(stream, wbits, entry.size, sink, hasher, limits.chunk_bytes)
            except _StreamError as exc:
                sink.discard()
                problem = problem or str(exc)  # the likelier codec's reason is the one to report
                if isinstance(exc, _WrongSize):
                    break  # it decoded: the row's one reading (see _codecs)
                continue
            except OSError as exc:
                sink.discard()
                raise EnvironmentProblem(
                    f"cannot hold the verified bytes of {entry.path} in "
                    f"{spill_dir or tempfile.gettempdir()} ({exc.strerror or exc})"
                ) from exc
            except BaseException:
                sink.discard()
                raise
            if hmac.compare_digest(hasher.digest(), entry.digest):
                return sink.finish()
            sink.discard()
            problem = problem or "does not match its signed sha256"
            break  # it decoded: the row's one reading
        raise TamperError(f"{entry.path} {problem}", entry.path)
    finally:
        # Inflating stops at the stream's end marker, which can leave a BLOB stream (and the
        # SQLite connection it holds) paused before its last step: close each one now rather
        # than whenever its frame is collected.
        for stream in opened:
            close = getattr(stream, "close", None)
            if close is not None:
                close()


SMALL_STORED_BYTES = 1024 * 1024  # stored this small: verified in memory, in one pass


def _codecs(entry: Entry, head: bytes) -> list[int | None]:
    """The wbits to try (None: stored as is).  An attempt that decodes to its end is the row's
    one reading, so raw DEFLATE is tried only where zlib's `uncompress()` would fail."""
    if entry.codec == "stored" or (entry.codec == "sqlar" and entry.stored_size == entry.size):
        return [None]
    if entry.codec == "deflate":
        return [-15]
    return [15, -15] if looks_like_zlib(head) else [-15]


def _read_small(chunks: Iterator[bytes], stored_size: int) -> bytes | None:
    """All stored bytes of a small file, or None if there are more than recorded."""
    parts, total = [], 0
    for chunk in chunks:
        total += len(chunk)
        if total > stored_size:
            return None  # the streaming path reports it
        parts.append(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _verify_small(entry: Entry, digest: bytes, stored: bytes) -> VerifiedBlob:
    """verify_content for stored bytes already in memory: same codecs, bounds and checks."""
    problem = ""
    for wbits in _codecs(entry, stored[:2]):
        try:
            out = _inflate_whole(stored, wbits, entry.size)
        except _StreamError as exc:
            problem = problem or str(exc)
            if isinstance(exc, _WrongSize):
                break  # it decoded: the row's one reading
            continue
        if hmac.compare_digest(hashlib.sha256(out).digest(), digest):
            return MemoryBlob(out)
        problem = problem or "does not match its signed sha256"
        break
    raise TamperError(f"{entry.path} {problem}", entry.path)


def _inflate_whole(stored: bytes, wbits: int | None, size: int) -> bytes:
    """`_inflate_with` over one piece held in memory, in one call: exactly `size` bytes out
    (never more than `size` + 1 produced), the stream's end reached, or _StreamError."""
    if wbits is None:
        out = stored
    else:
        inflater = zlib.decompressobj(wbits)
        try:
            out = inflater.decompress(stored, size + 1)
            if len(out) <= size and not inflater.eof:
                out += inflater.flush(size + 1 - len(out))
        except zlib.error as exc:
            raise _StreamError(f"does not inflate ({exc})") from exc
        if len(out) <= size and not inflater.eof:
            raise _StreamError("compressed stream is truncated")
    if len(out) > size:
        raise _StreamError("inflates past its size")
    if len(out) != size:
        raise _WrongSize(f"yields {len(out)} bytes, not {size}")
    return out


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
            blob = verify_content(entry, lambda: open_chunks(entry), self._limits,
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
