"""The one content path: bounded inflate, hash, release only verified bytes."""

from __future__ import annotations

import hashlib
import os
import tracemalloc
import zlib
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acxfs.container import Entry
from acxfs.content.cache import VerifiedCache
from acxfs.content.rule import MemoryBlob, SpilledBlob, verify_content
from acxfs.errors import TamperError
from acxfs.limits import Limits

KEY = "the source"  # what a Source passes to the store as its key


def _entry(data: bytes, stored: bytes, codec: str = "sqlar", size: int | None = None) -> Entry:
    return Entry("rom/x.bin", False, size=len(data) if size is None else size,
                 digest=hashlib.sha256(data).digest(), stored_size=len(stored),
                 codec=codec)  # type: ignore[arg-type]


def _chunks(blob: bytes, step: int = 7919) -> Iterator[bytes]:
    for i in range(0, len(blob), step):
        yield blob[i : i + step]


def _raw(data: bytes) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, -15)
    return packer.compress(data) + packer.flush()


DATA = b"".join(b"line %06d of a skill reference\n" % i for i in range(5000))


@pytest.mark.parametrize(
    "encode", [zlib.compress, _raw, lambda d: d], ids=["zlib", "raw", "stored"]
)
def test_every_sqlar_encoding_yields_the_signed_bytes(encode: Callable[[bytes], bytes]) -> None:
    stored = encode(DATA)
    blob = verify_content(_entry(DATA, stored), lambda: _chunks(stored))
    assert blob.read(0, blob.size) == DATA


def test_raw_deflate_that_looks_like_zlib_still_verifies() -> None:
    # A raw stream whose first two bytes pass the zlib header test: a stored block of 29 bytes
    # starts 08 1d (0x081d % 31 == 0). zlib is tried first, fails, and raw DEFLATE decides.
    from acxfs.content.rule import looks_like_zlib

    head, tail = DATA[:29], DATA[29:400]
    stored = (b"\x08" + (29).to_bytes(2, "little") + (0xFFFF - 29).to_bytes(2, "little") + head
              + b"\x01" + len(tail).to_bytes(2, "little")
              + (0xFFFF - len(tail)).to_bytes(2, "little") + tail)
    assert looks_like_zlib(stored)
    data = head + tail
    blob = verify_content(_entry(data, stored), lambda: _chunks(stored, 5))
    assert blob.read(0, blob.size) == data


def test_edited_content_with_stale_digest_is_tampered() -> None:
    stored = zlib.compress(DATA.replace(b"line 000042", b"LINE 000042"))
    with pytest.raises(TamperError, match=r"rom/x\.bin"):
        verify_content(_entry(DATA, stored), lambda: _chunks(stored))


def test_stream_ending_before_its_size_is_tampered() -> None:
    stored = zlib.compress(DATA[:-1])
    with pytest.raises(TamperError):
        verify_content(_entry(DATA, stored, size=len(DATA)), lambda: _chunks(stored))


def test_bytes_that_inflate_under_neither_codec_are_tampered() -> None:
    stored = os.urandom(1000)
    with pytest.raises(TamperError):
        verify_content(_entry(DATA, stored), lambda: _chunks(stored))


def test_inflation_bomb_fails_fast_with_bounded_memory() -> None:
    # 256 MiB of zeros compress to ~256 KiB; the entry claims 1 MiB: inflation must stop there.
    packer = zlib.compressobj(9)
    stored = b"".join(packer.compress(bytes(1 << 24)) for _ in range(16)) + packer.flush()
    claimed = bytes(1 << 20)
    entry = _entry(claimed, stored)
    tracemalloc.start()
    try:
        with pytest.raises(TamperError, match="past its size"):
            verify_content(entry, lambda: _chunks(stored, 1 << 16))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    print(f"peak traced memory while refusing a 256 MiB bomb: {peak / 2**20:.1f} MiB")
    assert peak < 16 * 2**20


def test_large_file_is_spilled_to_an_unlinked_file() -> None:
    data = os.urandom(3 << 20)
    limits = Limits(memory_spill_bytes=1 << 20)
    blob = verify_content(_entry(data, data), lambda: _chunks(data, 1 << 16), limits)
    assert isinstance(blob, SpilledBlob)
    assert blob.read(1 << 20, 10) == data[1 << 20 : (1 << 20) + 10]
    assert blob.read(len(data) - 5, 100) == data[-5:]
    blob.close()


def test_store_verifies_once_and_counts() -> None:
    stored = zlib.compress(DATA)
    calls = []

    def open_chunks(entry: Entry) -> Iterator[bytes]:
        calls.append(entry.path)
        return _chunks(stored)

    store = VerifiedCache()
    entry = _entry(DATA, stored)
    first, second = store.get(KEY, entry, open_chunks), store.get(KEY, entry, open_chunks)
    assert first is second and isinstance(first, MemoryBlob)
    assert store.stats.blobs_inflated == 1 and store.stats.cache_hits == 1
    assert store.stats.bytes_verified == len(DATA)


def test_store_counts_tamper_events_and_serves_nothing() -> None:
    stored = zlib.compress(b"x" * len(DATA))
    seen: list[TamperError] = []
    store = VerifiedCache(on_tamper=lambda key, exc: seen.append(exc))
    with pytest.raises(TamperError):
        store.get(KEY, _entry(DATA, stored), lambda e: _chunks(stored))
    assert store.stats.tamper_events == 1 and len(seen) == 1 and store.stats.blobs_inflated == 0


def _failing(path: str, data: bytes, stored: bytes) -> Entry:
    """An entry whose stored bytes inflate to `data` but whose digest is of other bytes."""
    return Entry(path, False, size=len(data), digest=hashlib.sha256(b"other").digest(),
                 stored_size=len(stored), codec="sqlar")


def test_failed_files_do_not_keep_their_inflated_bytes() -> None:
    # A file that fails stays failed for the life of a mount; what it inflated must not.
    data = bytes(4 << 20)
    stored = zlib.compress(data)  # small stored, 4 MiB inflated: the in-memory path
    store = VerifiedCache()
    tracemalloc.start()
    try:
        for i in range(12):
            with pytest.raises(TamperError):
                store.get(KEY, _failing(f"rom/f{i}.bin", data, stored),
                          lambda entry: iter((stored,)))
        current, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert store.stats.tamper_events == 12
    assert current < 8 << 20, f"{current / 2**20:.0f} MiB kept after 12 failed 4 MiB files"


def test_failed_files_do_not_keep_their_blob_streams_open() -> None:
    # Large stored files stream from an open SQLite BLOB handle: a failure must release it.
    data = os.urandom(3 << 20)
    stored = zlib.compress(data)  # over 1 MiB stored: streamed; inflating ends at its last chunk
    open_streams: set[int] = set()

    def stream(entry: Entry) -> Iterator[bytes]:
        open_streams.add(id(entry))
        try:
            yield from _chunks(stored, 1 << 18)
        finally:
            open_streams.discard(id(entry))

    store = VerifiedCache(Limits(memory_spill_bytes=1 << 20))
    entries = [_failing(f"rom/big{i}.bin", data, stored) for i in range(5)]
    for entry in entries:
        with pytest.raises(TamperError):
            store.get(KEY, entry, stream)
    import gc

    gc.collect()
    assert not open_streams, f"{len(open_streams)} BLOB streams still open"


def test_a_failing_tamper_report_never_strands_the_readers_waiting_on_it() -> None:
    import threading

    data = bytes(1 << 20)
    stored = zlib.compress(data)
    release = threading.Event()

    def slow(entry: Entry) -> Iterator[bytes]:
        release.wait(5)  # every reader arrives while the one check is still running
        yield stored

    def report(key: object, error: TamperError) -> None:
        raise RuntimeError("the log is broken")

    store = VerifiedCache(on_tamper=report)
    entry = _failing("rom/one.bin", data, stored)
    outcomes: list[str] = []

    def read() -> None:
        try:
            store.get(KEY, entry, slow)
        except Exception as exc:  # every reader must get an answer
            outcomes.append(type(exc).__name__)

    readers = [threading.Thread(target=read) for _ in range(4)]
    for reader in readers:
        reader.start()
    release.set()
    for reader in readers:
        reader.join(10)
    assert not any(reader.is_alive() for reader in readers), "a reader waits forever"
    assert outcomes == ["TamperError"] * 4


def test_a_connection_that_cannot_open_is_no_tamper_event(make_cartridge, trusted_registry) -> None:
    # Out of descriptors for a moment: a source reads on through the connection it keeps on
    # its checked file; a pool that must open one fails the read, and the file is not marked
    # tampered.
    from acxfs.errors import EnvironmentProblem
    from acxfs.formats import open_source
    from acxfs.formats.acx.connection import ConnectionPool
    from acxfs.formats.acx.source import stored_chunks
    from acxfs.trust.store import load_trust

    store = VerifiedCache()
    cart = make_cartridge()
    source, _ = open_source(str(cart), load_trust([str(trusted_registry)]), store)
    pool = ConnectionPool(str(cart))
    try:
        entry = next(e for e in source.tree.files() if e.size)
        held: list[int] = []
        try:
            while True:
                held.append(os.open("/dev/null", os.O_RDONLY))
        except OSError:
            pass
        try:
            assert source.blob(entry).size == entry.size
            with pytest.raises(EnvironmentProblem):
                store.get(pool, entry, lambda e: stored_chunks(pool, e, 65536))
        finally:
            for fd in held:
                os.close(fd)
        # and it reads once descriptors are free
        assert store.get(pool, entry, lambda e: stored_chunks(pool, e, 65536)).size == entry.size
        assert store.stats.tamper_events == 0
    finally:
        pool.close()
        source.close()


def test_a_file_taking_the_whole_verification_budget_does_not_hold_up_small_reads() -> None:
    import threading

    big_data = os.urandom(1 << 20)
    small_data = b"a small reference file\n"
    release = threading.Event()

    def chunks(entry: Entry) -> Iterator[bytes]:
        if entry.path == "rom/big.bin":
            release.wait(10)  # the large check is still running while the small read comes
            yield big_data
        else:
            yield small_data

    limits = Limits(inflight_bytes=1 << 20, memory_spill_bytes=64 * 1024)
    store = VerifiedCache(limits)
    big = Entry("rom/big.bin", False, size=len(big_data),
                digest=hashlib.sha256(big_data).digest(), stored_size=len(big_data))
    small = Entry("rom/small.md", False, size=len(small_data),
                  digest=hashlib.sha256(small_data).digest(), stored_size=len(small_data))
    reader = threading.Thread(target=store.get, args=(KEY, big, chunks))
    reader.start()
    try:
        done = threading.Event()

        def read_small() -> None:
            store.get(KEY, small, chunks)
            done.set()

        threading.Thread(target=read_small, daemon=True).start()
        assert done.wait(5), "a small read waited for the large file's check"
    finally:
        release.set()
        reader.join(10)
    assert store.get(KEY, big, chunks).read(0, 16) == big_data[:16]


# --- the one-call inflate of small files agrees with the streaming one -------------------------

_MUTATIONS = st.sampled_from(["as is", "truncate", "append", "flip", "shorter size", "longer size"])


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=3000), wbits=st.sampled_from([None, 15, -15]),
       mutation=_MUTATIONS, where=st.integers(min_value=0, max_value=10**6))
def test_small_files_inflate_in_one_call_exactly_as_streamed(
    data: bytes, wbits: int | None, mutation: str, where: int,
) -> None:
    from acxfs.content.rule import _inflate_whole, _inflate_with, _StreamError

    stored = data if wbits is None else (
        zlib.compress(data) if wbits == 15 else _raw(data))
    size = len(data)
    if mutation == "truncate":
        stored = stored[: where % (len(stored) + 1)]
    elif mutation == "append":
        stored += b"tail" * (1 + where % 3)
    elif mutation == "flip" and stored:
        i = where % len(stored)
        stored = stored[:i] + bytes([stored[i] ^ 0x41]) + stored[i + 1:]
    elif mutation == "shorter size":
        size = max(0, size - 1 - where % 5)
    elif mutation == "longer size":
        size += 1 + where % 5

    def outcome(run: Callable[[], bytes]) -> tuple[str, bytes | str]:
        try:
            return "bytes", run()
        except _StreamError as exc:
            return "error", str(exc)

    def streamed() -> bytes:
        pieces: list[bytes] = []
        _inflate_with(iter((stored,)), wbits, size, size + 1, pieces.append)
        return b"".join(pieces)

    assert outcome(lambda: _inflate_whole(stored, wbits, size)) == outcome(streamed)
