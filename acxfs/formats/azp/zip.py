"""The zip layer of an .azp package: central directory, local headers, small entries.

Invariant: `read_members` returns an entry only for a record whose path is safe and unique,
whose method is stored or deflate, unencrypted, within the size limits, and whose local header
agrees with the central directory, of an archive with no byte outside its listed entries: the
first listed entry starts at offset 0 and each one (local header, name, extra field, data,
data descriptor) ends where the next begins, the last where the central directory begins (no
hidden local entry a reader walking local headers would meet); no payload is read.
`read_small` inflates only the two metadata entries, within a bound, CRC checked; the
payload's stored bytes (`stored_chunks`) go only to `acxfs.content.cache`.
"""

from __future__ import annotations

import calendar
import os
import struct
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from acxfs import verdict as v
from acxfs.container import Codec
from acxfs.errors import Refused
from acxfs.limits import Limits
from acxfs.text import sentence

_LOCAL_HEADER = struct.Struct("<4sHHHHHLLLHH")
_LOCAL_MAGIC = b"PK\x03\x04"
_ENCRYPTED_FLAGS = 0x0001 | 0x0040 | 0x2000
_DESCRIPTOR_FLAG = 0x0008  # sizes and CRC follow the data, in a data descriptor
_DESCRIPTOR_MAGIC = b"PK\x07\x08"
_UTF8_FLAG = 0x0800
_CODECS: dict[int, Codec] = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}
_ZIP_ERRORS = (
    zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, struct.error, EOFError,
    OverflowError, NotImplementedError, OSError,
)


def malformed(text: str) -> Refused:
    """Stop the check: the package is malformed (`text` becomes the summary sentence)."""
    return Refused(v.Verdict("malformed", sentence(text, capitalise_path=True)))


def tampered(text: str, more: tuple[str, ...] = ()) -> Refused:
    """Stop the check: the package is tampered (further problems become warnings)."""
    return Refused(v.Verdict("tampered", sentence(text, capitalise_path=True)), more)


@dataclass(frozen=True, slots=True)
class Member:
    """One zip entry, from its central-directory record and its checked local header."""

    index: int  # position in ZipFile.infolist()
    name: str
    header_offset: int
    size: int  # uncompressed, as the central directory says
    stored_size: int
    codec: Codec
    crc: int
    data_offset: int
    mtime: int
    descriptor: bool = False  # a data descriptor follows the data


def _path_problem(name: str, limits: Limits) -> str | None:
    """Why `name` is not a safe package path (None when it is)."""
    if "\x00" in name:
        return "contains a NUL byte"
    if "\\" in name:
        return "contains a backslash"
    if name.startswith("/"):
        return "is absolute"
    if len(name.encode("utf-8", "surrogatepass")) > limits.max_name_bytes:
        return "is too long"
    segments = name.split("/")
    if len(segments) > limits.max_depth:
        return "is too deep"
    for segment in segments:
        if segment in ("", ".", ".."):
            return f"has a {segment!r} segment" if segment else "has an empty segment"
        if len(segment) > limits.max_segment_chars:
            return "has a segment that is too long"
    return None


def _zip_mtime(date_time: tuple[int, int, int, int, int, int]) -> int:
    try:
        return int(calendar.timegm((*date_time, 0, 0, 0)))
    except (ValueError, OverflowError):
        return 0


_EOCD = struct.Struct("<4s4H2LH")  # end of central directory record
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")


def _declared_entries(handle: BinaryIO) -> int | None:
    """How many entries the archive's end record says it holds (ZIP64 included), read from
    its last 64 KiB before anything parses the central directory; None if there is none (the
    parser then says what is wrong)."""
    end = os.fstat(handle.fileno()).st_size
    tail_start = max(0, end - (_EOCD.size + 0xFFFF))
    handle.seek(tail_start)
    tail = handle.read(end - tail_start)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or at + _EOCD.size > len(tail):
        return None
    fields = _EOCD.unpack_from(tail, at)
    count = fields[4]  # entries in the whole central directory
    locator_at = at - _ZIP64_LOCATOR.size
    if count == 0xFFFF and locator_at >= 0 and tail[locator_at:locator_at + 4] == b"PK\x06\x07":
        record_offset = _ZIP64_LOCATOR.unpack_from(tail, locator_at)[2]
        if 0 <= record_offset <= end - _ZIP64_EOCD.size:
            handle.seek(record_offset)
            record = handle.read(_ZIP64_EOCD.size)
            if record[:4] == b"PK\x06\x06":
                count = _ZIP64_EOCD.unpack(record)[7]
    return int(count)


def _read_infolist(handle: BinaryIO, limits: Limits) -> tuple[list[zipfile.ZipInfo], int]:
    """The central directory's records and where it starts; malformed if unreadable.  An
    archive whose end record declares more entries than the limit is refused before its
    central directory is parsed (a million entries take 11 s and 586 MB to parse)."""
    declared = _declared_entries(handle)
    if declared is not None and declared > limits.max_entries:
        raise malformed(f"{declared} zip entries exceed the limit of {limits.max_entries}")
    handle.seek(0)
    try:
        with zipfile.ZipFile(handle) as archive:
            infos = archive.infolist()
            start = getattr(archive, "start_dir", None)
    except _ZIP_ERRORS as exc:
        raise malformed(f"not a readable zip archive ({exc})") from exc
    if len(infos) > limits.max_entries:
        raise malformed(f"{len(infos)} zip entries exceed the limit of {limits.max_entries}")
    end = os.fstat(handle.fileno()).st_size
    return infos, start if isinstance(start, int) and 0 <= start <= end else end


def _check_record(info: zipfile.ZipInfo, limits: Limits) -> Codec:
    """Refuse encryption, other compression methods and sizes past the limits."""
    name = info.orig_filename
    if info.flag_bits & _ENCRYPTED_FLAGS:
        raise malformed(f"zip entry {name!r} is encrypted")
    codec = _CODECS.get(info.compress_type)
    if codec is None:
        raise malformed(f"zip entry {name!r} uses compression method {info.compress_type}")
    if info.file_size > limits.max_file_bytes:
        raise malformed(f"zip entry {name!r} exceeds the per-file size limit")
    if codec == "stored" and info.compress_size != info.file_size:
        raise malformed(f"stored zip entry {name!r} has differing sizes")
    return codec


def _data_offset(fd: int, info: zipfile.ZipInfo) -> int:
    """Parse the local file header; its name and method must match the central directory."""
    if not 0 <= info.header_offset <= os.fstat(fd).st_size - _LOCAL_HEADER.size:
        # ZIP64 fields (or a shifted central directory) can put an offset anywhere, even past
        # what pread accepts: it must point into the file.
        raise malformed(f"zip entry {info.orig_filename!r} has no local header")
    head = os.pread(fd, _LOCAL_HEADER.size, info.header_offset)
    if len(head) != _LOCAL_HEADER.size:
        raise malformed(f"zip entry {info.orig_filename!r} has no local header")
    magic, _, flags, method, *_, name_len, extra_len = _LOCAL_HEADER.unpack(head)
    raw_name = os.pread(fd, name_len, info.header_offset + _LOCAL_HEADER.size)
    encoding = "utf-8" if info.flag_bits & _UTF8_FLAG else "cp437"
    try:
        local_name = raw_name.decode(encoding)
    except UnicodeDecodeError:
        local_name = None
    if magic != _LOCAL_MAGIC or local_name != info.orig_filename or method != info.compress_type \
            or flags & _ENCRYPTED_FLAGS:
        raise malformed(
            f"zip entry {info.orig_filename!r}: local header differs from the central directory")
    return int(info.header_offset + _LOCAL_HEADER.size + name_len + extra_len)


def _descriptor_fits(fd: int, member: Member, gap: int) -> bool:
    """`gap` bytes after `member`'s data are exactly its data descriptor: the optional
    signature, its CRC-32 and both sizes (4 or, ZIP64, 8 bytes each), as the central
    directory records them."""
    if not member.descriptor or gap not in (12, 16, 20, 24):
        return False
    raw = os.pread(fd, gap, member.data_offset + member.stored_size)
    if len(raw) != gap or (gap in (16, 24)) != raw.startswith(_DESCRIPTOR_MAGIC):
        return False
    body = raw[4:] if gap in (16, 24) else raw
    crc, sizes = struct.unpack_from("<L", body)[0], body[4:]
    wide = len(sizes) == 16
    stored, size = struct.unpack("<QQ" if wide else "<LL", sizes)
    return (crc, stored, size) == (member.crc, member.stored_size, member.size)


def _check_layout(fd: int, members: list[Member], central_start: int) -> None:
    """The listed entries cover every byte up to the central directory: the first starts at
    offset 0 and each ends (data descriptor included) where the next one starts."""
    ordered = sorted(members, key=lambda m: m.header_offset)
    starts = [m.header_offset for m in ordered] + [central_start]
    if starts[0] != 0:
        raise malformed("the archive holds bytes before its first listed zip entry")
    for member, limit in zip(ordered, starts[1:], strict=True):
        end = member.data_offset + member.stored_size
        if end > limit:
            raise malformed(f"zip entry {member.name!r} overlaps other data")
        if end < limit and not _descriptor_fits(fd, member, limit - end):
            after = "the central directory" if limit == central_start else "the next entry"
            raise malformed(f"zip entry {member.name!r} is followed by bytes no listed entry "
                            f"holds (before {after})")


def read_members(handle: BinaryIO, limits: Limits) -> dict[str, Member]:
    """Every entry by name, after the zip-level and path checks (no payload is read)."""
    infos, central_start = _read_infolist(handle, limits)
    fd = handle.fileno()
    members: dict[str, Member] = {}
    for index, info in enumerate(infos):
        name = info.orig_filename
        problem = _path_problem(name, limits)
        if problem is not None:
            raise tampered(f"unsafe path {name!r}: it {problem}")
        if name in members:
            raise tampered(f"duplicate zip entry {name!r}")
        codec = _check_record(info, limits)
        try:
            offset = _data_offset(fd, info)
        except OSError as exc:
            raise malformed(f"zip entry {name!r} cannot be read ({exc})") from exc
        members[name] = Member(
            index, name, info.header_offset, info.file_size, info.compress_size, codec,
            info.CRC, offset, _zip_mtime(info.date_time),
            bool(info.flag_bits & _DESCRIPTOR_FLAG),
        )
    try:
        _check_layout(fd, list(members.values()), central_start)
    except OSError as exc:
        raise malformed(f"the archive cannot be read ({exc})") from exc
    return members


def stored_chunks(fd: int, offset: int, length: int, step: int) -> Iterator[bytes]:
    """`length` stored bytes from `offset`, in steps; stops early if the file got shorter."""
    while length > 0:
        chunk = os.pread(fd, min(step, length), offset)
        if not chunk:
            return
        offset += len(chunk)
        length -= len(chunk)
        yield chunk


def read_small(fd: int, member: Member, bound: int, limits: Limits) -> bytes:
    """Inflate one metadata entry (manifest or signature) within `bound` bytes, CRC checked."""
    if member.size > bound:
        raise malformed(f"{member.name} is larger than {bound} bytes")
    out = bytearray()
    inflater = zlib.decompressobj(-15) if member.codec == "deflate" else None
    try:
        for chunk in stored_chunks(fd, member.data_offset, member.stored_size, limits.chunk_bytes):
            data = chunk
            while data and (inflater is None or not inflater.eof):
                if inflater is None:
                    piece, data = data, b""
                else:  # never more than one byte past the recorded size
                    piece = inflater.decompress(data, member.size + 1 - len(out))
                    data = inflater.unconsumed_tail
                out += piece
                if len(out) > member.size:
                    raise malformed(f"{member.name} inflates past its recorded size")
    except zlib.error as exc:
        raise malformed(f"{member.name} does not inflate ({exc})") from exc
    if len(out) != member.size or (inflater is not None and not inflater.eof):
        raise malformed(f"{member.name} does not inflate to its recorded size")
    if zlib.crc32(out) != member.crc:
        raise malformed(f"{member.name} fails its CRC-32")
    return bytes(out)
