"""Every bound acxfs applies to untrusted input, in one place.

A container that exceeds a bound is refused as malformed (most messages name the bound);
nothing is allocated in proportion to a size an attacker wrote before it was checked here.
The signature row's text columns are read cut one past `max_key_bytes` (the envelope past
`max_envelope_bytes`), so an oversized one fails the check that reads it (an envelope is
malformed, a PEM key is no key) without being copied whole.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Limits:
    """Maximum sizes and counts; every field is checked before the matching work is done."""

    max_entries: int = 1_000_000  # sqlar rows or zip entries
    max_objects: int = 2_000_000  # `objects` rows
    max_name_bytes: int = 4096  # one path, UTF-8
    max_segment_chars: int = 128  # one path segment (the path rule allows 1 + 127)
    max_depth: int = 64  # path segments
    max_dir_path_bytes: int = 32 * 1024**2  # all distinct directory paths together, UTF-8
    max_key_bytes: int = 64 * 1024  # a signature row's columns; an objects canon/source_ref
    max_file_bytes: int = 4 * 1024**3  # one file, uncompressed
    max_envelope_bytes: int = 1024**2  # the DSSE envelope text
    max_registry_bytes: int = 4 * 1024**2  # one trust registry file
    max_meta_bytes: int = 16 * 1024**2  # one cartridge/memory/capability value (hashed live)
    max_signatures: int = 16  # signatures inside one envelope
    max_manifest_bytes: int = 64 * 1024**2  # an azp manifest.json
    max_countersign_hops: int = 10  # azp countersignature chain
    memory_spill_bytes: int = 8 * 1024**2  # verified files above this live in an unlinked file
    cache_bytes: int = 256 * 1024**2  # verified plaintext kept in memory, in all
    inflight_bytes: int = 2 * 1024**3  # bytes being inflated at once, in all
    chunk_bytes: int = 256 * 1024  # BLOB read step


DEFAULT_LIMITS = Limits()
