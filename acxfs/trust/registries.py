"""Trust registries installed by command: `acxfs trust add REGISTRY.json` and
`acxfs trust remove REGISTRY_ID`.

Invariant: a registry is installed only after it passed the loader's own check
(`parse_registry`), under `registries/<registryId>.json` of the trust store, written under a
fresh name and renamed into place through the store's writers (no link followed or written
through); what is installed is the bytes that were checked.
"""

from __future__ import annotations

import os
from pathlib import Path

from acxfs.container import SEGMENT_RE
from acxfs.errors import TrustConfigError
from acxfs.paths import trust_dir
from acxfs.safe import strict_json
from acxfs.safe.dirs import current_umask, make_dirs
from acxfs.safe.files import replace_file_at
from acxfs.trust.policy import REGISTRY_SCHEMA, RegistryKey, parse_registry
from acxfs.trust.store import check_guarded_path


def is_registry(data: bytes) -> bool:
    """Whether `data` says it is a trust registry (then it is checked as one)."""
    try:
        doc = strict_json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    return isinstance(doc, dict) and doc.get("schemaVersion") == REGISTRY_SCHEMA


def install_registry(data: bytes, source: str,
                     store: Path | None = None) -> tuple[str, Path, list[RegistryKey]]:
    """Check `data` as the loader does and install it; (registryId, its file, its keys)."""
    store = trust_dir() if store is None else store
    text = data.decode("utf-8")
    keys = parse_registry(text, source)
    doc = strict_json.loads(text)
    assert isinstance(doc, dict)
    registry_id = doc.get("registryId")
    if not isinstance(registry_id, str) or not SEGMENT_RE.fullmatch(registry_id):
        raise TrustConfigError(f"trust registry {source} is unusable: its registryId is not "
                               "a safe file name")
    if store.exists():
        check_guarded_path(store)
    path = store / "registries" / f"{registry_id}.json"
    with make_dirs(os.path.realpath(store) + "/registries") as made:
        replace_file_at(made.fd, path.name, data, 0o644 & ~current_umask())
    return registry_id, path, keys


def remove_registry(registry_id: str, store: Path | None = None) -> bool:
    store = trust_dir() if store is None else store
    if not SEGMENT_RE.fullmatch(registry_id):
        return False
    path = store / "registries" / f"{registry_id}.json"
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True
