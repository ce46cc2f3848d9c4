"""An independent writer of ACX 0.1 cartridges, for the tests and the fuzzer.

Written from the ACX 0.1 format contract with the standard library and PyNaCl only. It
never imports ``acxfs``: it is a second implementation of the format, used to check acxfs.

It writes what the spec describes, and nothing stops it from writing what the spec forbids: it
does not validate names, modes or frontmatter, so tests can sign hostile cartridges (an unsafe
name, a symlink row, a file/dir conflict) whose only fault is the one under test.

Conventions
-----------
* ``files`` maps FULL sqlar names to bytes (``{"rom/skills/demo/SKILL.md": b"..."}``); names are
  stored as given. Every name except ``save/...`` ones gets one ``objects`` row (kind ``sqlar``,
  canon ``raw``, zone ``rom``, ``oid = 'sha256:' + hex(sha256(uncompressed bytes))``), hostile
  names included: a hostile row is signed like any other, so its name is its only fault.
  ``save/...`` rows (the unsigned SAVE zone) get a ``sqlar`` row only.
* Two ROM objects with the same oid cannot both be signed (``objects.oid`` is the primary key):
  the writer refuses that with ``ValueError``, as acxfs's writer must.
* Timestamps are fixed (``SIGNED_AT``), so every build is reproducible for a given key.

Main entry points: :func:`new_signer`, :func:`build_cartridge`, :func:`resign`,
:func:`registry_entry`, :func:`registry_json`. The reading helpers (:func:`rom_rows`,
:func:`manifest_hash`, :func:`live_oid`, :func:`open_envelope`) exist so the writer can be checked
against the real cartridges in ``tests/fixtures/real/``.

Modules: ``spec`` (constants and DDL), ``encoding`` (JCS, digests, keys), ``manifest``
(sqlar content, skill rows, manifest hashes), ``dsse`` (envelopes, the signature row),
``writer`` (``build_cartridge``, ``resign``), ``registry`` (trust registries); every public
name is re-exported here, so callers write ``cw.<name>``.
"""

from __future__ import annotations

from scripts.cartwriter.dsse import (
    open_envelope,
    sign_envelope,
    statement_for,
    write_signature,
)
from scripts.cartwriter.encoding import (
    Signer,
    b64decode_any,
    jcs,
    keyid_from_pem,
    keyid_of,
    new_signer,
    oid_of,
    pae,
    private_pem,
    public_pem,
    raw_public_from_pem,
    sha256_hex,
)
from scripts.cartwriter.manifest import (
    RomObject,
    cartridge_object_bytes,
    checksum_hash,
    compress,
    inflate,
    is_skill_md,
    live_oid,
    manifest_bytes,
    manifest_hash,
    parse_frontmatter,
    rom_rows,
    skill_row,
)
from scripts.cartwriter.registry import (
    namespace_proof,
    registry_entry,
    registry_json,
)
from scripts.cartwriter.spec import (
    APPLICATION_ID,
    DDL,
    EMBEDDING_ENGINE,
    FILE_MODE,
    GITHUB_OIDC_ISSUER,
    NOT_AFTER,
    NOT_BEFORE,
    PAYLOAD_TYPE,
    PKCS8_PREFIX,
    PREDICATE_TYPE,
    REGISTRY_SCHEMA,
    SIGNED_AT,
    SKILL_SCHEMA,
    SPEC_VERSION,
    SPKI_PREFIX,
    SQLAR_DIR_MODE,
    SQLAR_FILE_MODE,
    STATEMENT_TYPE,
    USER_VERSION,
    VERIFIED_AT,
)
from scripts.cartwriter.writer import (
    build_cartridge,
    resign,
)

__all__ = [
    "APPLICATION_ID",
    "DDL",
    "EMBEDDING_ENGINE",
    "FILE_MODE",
    "GITHUB_OIDC_ISSUER",
    "NOT_AFTER",
    "NOT_BEFORE",
    "PAYLOAD_TYPE",
    "PKCS8_PREFIX",
    "PREDICATE_TYPE",
    "REGISTRY_SCHEMA",
    "SIGNED_AT",
    "SKILL_SCHEMA",
    "SPEC_VERSION",
    "SPKI_PREFIX",
    "SQLAR_DIR_MODE",
    "SQLAR_FILE_MODE",
    "STATEMENT_TYPE",
    "USER_VERSION",
    "VERIFIED_AT",
    "RomObject",
    "Signer",
    "b64decode_any",
    "build_cartridge",
    "cartridge_object_bytes",
    "checksum_hash",
    "compress",
    "inflate",
    "is_skill_md",
    "jcs",
    "keyid_from_pem",
    "keyid_of",
    "live_oid",
    "manifest_bytes",
    "manifest_hash",
    "namespace_proof",
    "new_signer",
    "oid_of",
    "open_envelope",
    "pae",
    "parse_frontmatter",
    "private_pem",
    "public_pem",
    "raw_public_from_pem",
    "registry_entry",
    "registry_json",
    "resign",
    "rom_rows",
    "sha256_hex",
    "sign_envelope",
    "skill_row",
    "statement_for",
    "write_signature",
]
