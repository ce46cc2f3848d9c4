"""Trust: registries, pins, the local key, and the standard's taxonomy for a verified signer.

Keys come only from outside the container: `acx.trust-registry/1` files, pins the user made
with `acxfs trust add`, the local key made by `acxfs keygen`, and `--registry` / `--trust-key`
for one command.  A `TrustContext` is built from those files and does no other I/O;
`TrustContext.evaluate` maps a signer that already verified to a verdict (section 6).  Every
stored pin names exactly one publisher (a stored pin naming none is ignored, with a warning
naming it); only a `--trust-key` key, given for one command, covers any publisher.  Nothing of
the store is read from another filesystem than the store's directory (a mount inside it).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import re
import shlex
import stat
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from acxfs import strict_json
from acxfs import verdict as v
from acxfs.errors import EnvironmentProblem, KeyFormatError, TrustConfigError, UnsafePathError
from acxfs.inputs import open_input
from acxfs.keys import PublicKey, load_public_key_file, public_key_from_pem
from acxfs.limits import DEFAULT_LIMITS, Limits
from acxfs.safe_files import replace_file_at
from acxfs.safe_fs import current_umask, make_dirs
from acxfs.text import printable

REGISTRY_SCHEMA = "acx.trust-registry/1"
_TOP_FIELDS = {"schemaVersion", "registryId", "updatedAt", "keys"}
_REQUIRED = {
    "keyid", "publisherId", "algorithm", "publicKeyPem", "status", "notBefore", "notAfter",
    "namespaceProof",
}
_OPTIONAL = {"rotatedFrom", "rotatedTo", "revokedAt", "revocationReason"}
_STATUSES = {"active", "revoked", "expired"}
_REASONS = {"key-compromise", "superseded", "retired"}
OIDC_ISSUER = "https://token.actions.githubusercontent.com"
_PUBLISHER_RE = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+")


def parse_time(text: object) -> dt.datetime | None:
    """An RFC 3339 / ISO 8601 timestamp as an aware datetime, or None."""
    if not isinstance(text, str):
        return None
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def xdg_dir(variable: str, *default: str) -> Path:
    """`$variable`, or ~/`default` when it is unset or relative (the XDG base directory rules:
    a relative value is invalid, and would move with the working directory)."""
    base = os.environ.get(variable, "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), *default)
    return Path(base)


def trust_dir() -> Path:
    """The user's trust store: $ACXFS_TRUST_DIR (made absolute), else
    ${XDG_CONFIG_HOME:-~/.config}/acxfs."""
    explicit = os.environ.get("ACXFS_TRUST_DIR")
    if explicit:
        return Path(os.path.abspath(explicit))
    return xdg_dir("XDG_CONFIG_HOME", ".config") / "acxfs"


@dataclass(frozen=True)
class RegistryKey:
    keyid: str
    publisher: str
    key: PublicKey
    status: str
    not_before: dt.datetime
    not_after: dt.datetime
    proof: object
    revoked_at: dt.datetime | None
    revocation_reason: str | None
    source: str

    def proof_fits(self) -> bool:
        return namespace_proof_fits(self.publisher, self.proof)


@dataclass(frozen=True)
class Pin:
    """A key the user chose to trust: a stored pin for one publisher, or (publisher None)
    a `--trust-key` key for any publisher, for one command only."""

    keyid: str
    key: PublicKey
    publisher: str | None
    source: str


def namespace_proof_fits(publisher: str, proof: object) -> bool:
    """The exact proof shape section 6 requires for `publisher`."""
    if not isinstance(proof, dict) or not all(isinstance(x, str) for x in proof.values()):
        return False
    parts = publisher.split(".")
    if len(parts) >= 3 and parts[0] == "io" and parts[1] == "github":
        return (
            set(proof) == {"method", "oidcSubject", "oidcIssuer", "verifiedAt"}
            and proof["method"] == "github-oidc"
            and proof["oidcSubject"].startswith(f"repo:{parts[2]}/")
            and proof["oidcIssuer"] == OIDC_ISSUER
        )
    return (
        set(proof) == {"method", "txtRecord", "verifiedAt"}
        and proof["method"] == "dns-txt"
        and proof["txtRecord"] == "_acx-challenge." + ".".join(reversed(parts))
    )


def parse_registry(text: str, source: str, limits: Limits = DEFAULT_LIMITS) -> list[RegistryKey]:
    """Validate an acx.trust-registry/1 document; TrustConfigError names what is wrong."""

    def bad(why: str) -> TrustConfigError:
        return TrustConfigError(f"trust registry {source} is unusable: {why}")

    if len(text) > limits.max_registry_bytes:
        raise bad("too large")
    if "PRIVATE KEY" in text:
        raise bad("it contains private key material")
    try:
        doc = strict_json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise bad(f"not JSON ({exc})" if "duplicate" in str(exc) else "not JSON") from exc
    if not isinstance(doc, dict):
        raise bad("not a JSON object")
    unknown = set(doc) - _TOP_FIELDS
    if unknown:
        raise bad(f"unknown field {sorted(unknown)[0]!r}")
    if doc.get("schemaVersion") != REGISTRY_SCHEMA:
        raise bad(f"schemaVersion is not {REGISTRY_SCHEMA!r}")
    entries = doc.get("keys")
    if not isinstance(entries, list):
        raise bad("keys is not a list")
    keys: list[RegistryKey] = []
    seen: set[str] = set()
    for item in entries:
        if not isinstance(item, dict):
            raise bad("a key entry is not an object")
        missing = _REQUIRED - set(item)
        if missing:
            raise bad(f"a key entry lacks {sorted(missing)[0]!r}")
        unknown = set(item) - _REQUIRED - _OPTIONAL
        if unknown:
            raise bad(f"unknown field {sorted(unknown)[0]!r}")
        keyid = item["keyid"]
        if not isinstance(keyid, str) or keyid in seen:
            raise bad(f"duplicate or invalid keyid {keyid!r}")
        seen.add(keyid)
        for name in ("status", "algorithm", "revocationReason", "revokedAt"):
            if name in item and item[name] is not None and not isinstance(item[name], str):
                raise bad(f"{keyid}: {name} must be a string")
        if item["algorithm"] != "ed25519":
            raise bad(f"{keyid}: algorithm is not ed25519")
        if item["status"] not in _STATUSES:
            raise bad(f"{keyid}: unknown status {item['status']!r}")
        reason = item.get("revocationReason")
        if reason is not None and reason not in _REASONS:
            raise bad(f"{keyid}: unknown revocationReason {reason!r}")
        if not isinstance(item["publisherId"], str) or not isinstance(item["publicKeyPem"], str):
            raise bad(f"{keyid}: publisherId and publicKeyPem must be strings")
        try:
            key = public_key_from_pem(item["publicKeyPem"])
        except KeyFormatError as exc:
            raise bad(f"{keyid}: publicKeyPem: {exc}") from exc
        if key.keyid != keyid:
            raise bad(f"{keyid}: publicKeyPem has keyid {key.keyid}")
        not_before, not_after = parse_time(item["notBefore"]), parse_time(item["notAfter"])
        revoked_at = parse_time(item.get("revokedAt"))
        if not_before is None or not_after is None:
            raise bad(f"{keyid}: notBefore/notAfter are not timestamps")
        if item.get("revokedAt") is not None and revoked_at is None:
            raise bad(f"{keyid}: revokedAt is not a timestamp")
        keys.append(
            RegistryKey(
                keyid, item["publisherId"], key, item["status"], not_before, not_after,
                item["namespaceProof"], revoked_at, reason, source,
            )
        )
    return keys


def load_registry_file(path: str | Path, limits: Limits = DEFAULT_LIMITS) -> list[RegistryKey]:
    try:
        with open_input(path) as handle:
            data = handle.read(limits.max_registry_bytes + 1)
    except OSError as exc:
        raise TrustConfigError(f"cannot read trust registry {path}: {exc.strerror}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TrustConfigError(f"trust registry {path} is unusable: not UTF-8") from exc
    return parse_registry(text, str(path), limits)


@dataclass(frozen=True)
class TrustDecision:
    trust: v.Trust
    summary: str


@dataclass
class TrustContext:
    """Every key acxfs trusts for this command. Built from files; evaluates without I/O."""

    registry: list[RegistryKey] = field(default_factory=list)
    pins: list[Pin] = field(default_factory=list)
    local: dict[str, PublicKey] = field(default_factory=dict)

    def key_for(self, keyid: str) -> PublicKey | None:
        """A key from outside the container with this keyid."""
        for record in self.registry:
            if record.keyid == keyid:
                return record.key
        for pin in self.pins:
            if pin.keyid == keyid:
                return pin.key
        return self.local.get(keyid)

    def evaluate(
        self, keyid: str, publisher: str | None, signed_at: str | None, now: dt.datetime
    ) -> TrustDecision:
        """The section 6 taxonomy for a signer whose signature verified."""
        records = [r for r in self.registry if r.keyid == keyid]
        signed = parse_time(signed_at)
        revoked = [r for r in records if r.status == "revoked"]
        if any(r.revocation_reason == "key-compromise" for r in revoked):
            return TrustDecision("tampered", v.KEY_COMPROMISED)
        if revoked:
            before = all(
                signed is not None and r.revoked_at is not None and signed < r.revoked_at
                for r in revoked
            )
            return TrustDecision("portable", v.REVOKED_AFTER if before else v.REVOKED)
        if keyid in self.local:
            return TrustDecision("local", v.LOCAL)
        pinned = [p for p in self.pins if p.keyid == keyid]
        if publisher and any(p.publisher in (None, publisher) for p in pinned):
            return TrustDecision("trusted", v.trusted_summary(publisher))
        for r in records:
            if (
                r.status == "active"
                and publisher is not None
                and r.publisher == publisher
                and signed is not None
                and r.not_before <= signed <= r.not_after
                and now <= r.not_after
                and r.proof_fits()
            ):
                return TrustDecision("trusted", v.trusted_summary(publisher))
        if records or pinned:
            return TrustDecision("portable", v.NOT_ELIGIBLE)
        return TrustDecision("portable", v.NOT_IN_REGISTRY)


# --- the on-disk trust store ------------------------------------------------------------
# <dir>/registries/*.json   registry files the user installed (acx.trust-registry/1)
# <dir>/pins/<sha256 hex>.json   {"keyid", "publicKeyPem", "publisherId" | null, "addedAt", "note"}
# <dir>/keys/local.pem, local.pub.pem   the default key pair of `acxfs keygen` (counts as local)

LOCAL_PRIVATE = "keys/local.pem"
LOCAL_PUBLIC = "keys/local.pub.pem"


def load_trust(
    registries: Iterable[str] = (),
    trust_keys: Iterable[str] = (),
    store: Path | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> TrustContext:
    """The trust store plus one command's `--registry` and `--trust-key` files."""
    store = trust_dir() if store is None else store
    ctx = TrustContext()
    check_guarded_path(store)
    device = store_device(store)
    reg_dir = store / "registries"
    if reg_dir.is_dir():
        check_guarded(reg_dir, device)
        for installed in sorted(reg_dir.glob("*.json")):
            check_guarded(installed, device)
            ctx.registry.extend(load_registry_file(installed, limits))
    for given in registries:
        ctx.registry.extend(load_registry_file(given, limits))
    ctx.pins.extend(list_pins(store))
    for key_file in trust_keys:
        key = load_public_key_file(key_file)
        ctx.pins.append(Pin(key.keyid, key, None, key_file))
    local_pub = store / LOCAL_PUBLIC
    if local_pub.parent.is_dir():
        check_guarded(local_pub.parent, device)
    if local_pub.is_file():
        check_guarded(local_pub, device)
        key = load_public_key_file(str(local_pub))
        ctx.local[key.keyid] = key
    return ctx


def check_guarded_path(store: Path) -> None:
    """`check_guarded` for the store and every directory above it: whoever can rename an
    entry in any of them can put another store in its place (a directory others can write is
    safe only with the sticky bit, as /tmp has it)."""
    check_guarded(store)
    for parent in Path(os.path.realpath(store)).parents:
        try:
            info = os.stat(parent)
        except OSError:
            continue
        if info.st_mode & stat.S_IWOTH and not info.st_mode & stat.S_ISVTX:
            raise TrustConfigError(
                f"trust store {store} lies in {parent}, which anyone can write (mode "
                f"{stat.S_IMODE(info.st_mode):o}, no sticky bit): anyone could put another "
                f"store in its place; run: chmod o-w {shlex.quote(str(parent))}")
        if info.st_uid not in (os.getuid(), 0):
            raise TrustConfigError(
                f"trust store {store} lies in {parent}, which belongs to uid {info.st_uid}: "
                "whoever owns it could put another store in its place")


def store_device(store: Path) -> int | None:
    """The device of the store's directory (None when there is no store yet)."""
    try:
        return os.stat(store).st_dev
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise TrustConfigError(f"cannot inspect trust store {store}: {exc.strerror}") from exc


def check_guarded(path: Path, device: int | None = None) -> None:
    """Refuse a part of the trust store that someone else can change: whoever can write a
    pin, a registry or the local key there chooses which keys this user trusts.  It must
    belong to this user or root and not be writable by others (group-writable is allowed:
    with per-user groups, the usual Debian set-up, the group is the user), and lie on
    `device`, the store directory's (a filesystem mounted inside the store, an unsigned
    cartridge over `keys/` say, would choose them too)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise TrustConfigError(f"cannot inspect trust store {path}: {exc.strerror}") from exc
    if device is not None and info.st_dev != device:
        raise TrustConfigError(
            f"trust store {path} lies on another filesystem than the trust store's directory "
            "(something is mounted inside the store): whoever made that mount would choose "
            "which keys you trust; unmount it")
    if info.st_uid not in (os.getuid(), 0):
        raise TrustConfigError(
            f"trust store {path} belongs to uid {info.st_uid}, not to you or root: whoever owns "
            "it chooses which keys you trust")
    if info.st_mode & stat.S_IWOTH:
        raise TrustConfigError(
            f"trust store {path} is writable by anyone (mode {stat.S_IMODE(info.st_mode):o}): "
            f"anyone could choose which keys you trust; run: chmod o-w {shlex.quote(str(path))}")


def _read_pin(path: Path) -> dict[str, object]:
    """A pin file's JSON object (strict: one meaning per key), or ValueError/OSError."""
    with open_input(path) as handle:
        data = handle.read(PIN_BYTES + 1)
    if len(data) > PIN_BYTES:
        raise ValueError(f"larger than {PIN_BYTES} bytes")
    doc = strict_json.loads(data.decode("utf-8"))
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    return doc


PIN_BYTES = 64 * 1024  # a pin holds one PEM key and a few short fields


def _load_pin(path: Path) -> Pin:
    try:
        doc = _read_pin(path)
        for field_name in ("keyid", "publicKeyPem"):
            if not isinstance(doc.get(field_name), str):
                raise ValueError(f"{field_name} is missing or not a string")
        key = public_key_from_pem(str(doc["publicKeyPem"]))
        if key.keyid != doc["keyid"]:
            raise ValueError("keyid does not match its key")
        # A pin that lost the field is broken, not a pin for every publisher; one that says
        # null names no publisher and is ignored (`list_pins`).
        if "publisherId" not in doc:
            raise ValueError("publisherId is missing")
        publisher = doc["publisherId"]
        if not (publisher is None or isinstance(publisher, str)):
            raise ValueError("publisherId is neither a string nor null")
    except (OSError, ValueError, KeyError, TypeError, KeyFormatError, RecursionError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise TrustConfigError(f"pinned key {path} is unusable: {reason}") from exc
    return Pin(key.keyid, key, publisher, str(path))


def pin_path(store: Path, keyid: str) -> Path:
    return store / "pins" / (hashlib.sha256(keyid.encode()).hexdigest()[:32] + ".json")


def add_pin(key: PublicKey, publisher: str, note: str, store: Path | None = None) -> Path:
    """Record `key` as trusted for `publisher`. Atomic; replaces a pin."""
    if not valid_publisher(publisher):
        raise EnvironmentProblem(f"publisher {publisher!r} is not a reverse-DNS name")
    store = trust_dir() if store is None else store
    path = pin_path(store, key.keyid)
    doc = {
        "keyid": key.keyid,
        "publicKeyPem": key.pem,
        "publisherId": publisher,
        "addedAt": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "note": note,
    }
    # Written relative to the pins directory's descriptor under a fresh name and renamed into
    # place (a link planted at the pin's name is replaced, never written through).  The
    # store's own path is resolved first: check_guarded_path vouches for every directory above.
    data = (json.dumps(doc, indent=2) + "\n").encode()
    with make_dirs(os.path.realpath(path.parent)) as made:
        try:
            replace_file_at(made.fd, path.name, data, 0o644 & ~current_umask())
        except UnsafePathError:
            # Another `trust add` of this key renamed its pin over this one meanwhile: that
            # is no refusal when what is there now pins the same key for the same publisher.
            try:
                there = _load_pin(path)
            except TrustConfigError:
                there = None
            if there is None or (there.keyid, there.publisher) != (key.keyid, publisher):
                raise
    return path


def pin_key(key: PublicKey, publisher: str | None, note: str) -> tuple[Path, str | None]:
    """Pin `key` for `publisher` in the trust store; returns the pin file and the publisher
    of an earlier pin of that key it replaced, if it named another one.  No publisher, no
    pin: a pin always names the one publisher its key is trusted for."""
    from_before = next((p for p in list_pins() if p.keyid == key.keyid), None)
    if publisher is None:
        now = (f" (it is pinned for publisher {from_before.publisher} now)"
               if from_before is not None and from_before.publisher is not None else "")
        raise EnvironmentProblem(
            f"no publisher to pin {key.keyid} for{now}: a pin trusts a key for one publisher; "
            "pass --publisher ID")
    path = add_pin(key, publisher, note)
    replaced = (from_before.publisher if from_before is not None
                and from_before.publisher != publisher else None)
    return path, replaced


def remove_pin(keyid: str, store: Path | None = None) -> bool:
    """Remove every pin file naming `keyid` (a copy under another name would keep it trusted:
    the store loads every `pins/*.json`)."""
    store = trust_dir() if store is None else store
    removed = False
    for path in sorted((store / "pins").glob("*.json")):
        try:
            doc = _read_pin(path)
        except (OSError, ValueError, RecursionError):
            continue  # not a pin acxfs could load either
        if doc.get("keyid") == keyid:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed = True
    return removed


def list_pins(store: Path | None = None) -> list[Pin]:
    """The store's pins, each for one publisher; a pin naming none is left out, with a
    warning naming it (once per process and file)."""
    store = trust_dir() if store is None else store
    pin_dir = store / "pins"
    if not pin_dir.is_dir():
        return []
    device = store_device(store)
    check_guarded(pin_dir, device)
    pins = []
    for pin_file in sorted(pin_dir.glob("*.json")):
        check_guarded(pin_file, device)
        pin = _load_pin(pin_file)
        if pin.publisher is None:
            warn_once(f"pinned key {pin_file} ({pin.keyid}) names no publisher and is ignored; "
                      f"pin the key again for its publisher: acxfs trust add KEY.pub.pem "
                      "--publisher ID")
            continue
        pins.append(pin)
    return pins


_WARNED: set[str] = set()


def warn_once(message: str) -> None:
    """One line on stderr (`acxfs: warning: ...`), said once per process."""
    if message in _WARNED:
        return
    _WARNED.add(message)
    if sys.stderr is not None:
        with contextlib.suppress(OSError, ValueError):
            print(printable(f"acxfs: warning: {message}"), file=sys.stderr, flush=True)


def valid_publisher(publisher: str) -> bool:
    return bool(_PUBLISHER_RE.fullmatch(publisher))
