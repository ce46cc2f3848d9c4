"""The verification rule: stored bytes become verified bytes only through `verify_content`.

`verify_content` consumes a file's stored bytes, inflates them (sqlar: one reading per row,
zlib whenever `uncompress()` with a `sz`-byte buffer accepts it, as `sqlite3 -Ax` reads it,
else raw DEFLATE; zip: raw DEFLATE or stored), never produces more than the entry's size, and
returns a `VerifiedBlob` only when the stream ended exactly at that size and its sha256
equals the signed digest.  Otherwise it raises `TamperError` naming the path.  Large files
are accumulated in an unlinked temporary file, so memory stays bounded.

Invariant: every `VerifiedBlob` made here holds exactly the bytes whose sha256 is the entry's
signed digest.  Only the cache (`acxfs.content.cache`) and the formats' deep checks call
`verify_content`; only the formats hand it stored bytes.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import os
import queue
import tempfile
import threading
import zlib
from collections.abc import Callable, Iterator

from acxfs.container import Entry, VerifiedBlob
from acxfs.errors import EnvironmentProblem, TamperError
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


