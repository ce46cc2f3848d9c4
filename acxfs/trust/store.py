"""The trust store on disk: the registries the user installed, their pins, the local key.

Layout (`acxfs.paths.trust_dir()`):
- `registries/*.json`: registry files the user installed (`acx.trust-registry/1`);
- `pins/<sha256 hex>.json`: `{"keyid", "publicKeyPem", "publisherId" | null, "addedAt", "note"}`;
- `keys/local.pem`, `keys/local.pub.pem`: the default key pair of `acxfs keygen` (local).

Invariant: nothing of the store is read from another filesystem than the store's directory (a
mount inside it), from a directory another user controls, or through a link; what it cannot
use is reported through `warnings` (the CLI prints them), never printed here.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from acxfs.errors import EnvironmentProblem, KeyFormatError, TrustConfigError, UnsafePathError
from acxfs.limits import DEFAULT_LIMITS, Limits
from acxfs.paths import trust_dir
from acxfs.safe import ownership, strict_json
from acxfs.safe.dirs import current_umask, make_dirs
from acxfs.safe.files import replace_file_at
from acxfs.safe.inputs import open_input
from acxfs.signing.keys import PublicKey, load_public_key_file, public_key_from_pem
from acxfs.trust.policy import Pin, RegistryKey, TrustContext, parse_registry, valid_publisher

# Where a problem the store can live with (a pin it ignores) is said; the CLI sets a printer.
warnings: list[Callable[[str], None]] = []


def warn(message: str) -> None:
    for sink in warnings:
        sink(message)


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
    """`check_guarded` for the store, and the ownership rule (`acxfs.safe.ownership`) for
    every directory that decides what the store's path names: whoever can rename an entry in
    any of them can put another store in its place (a directory others can write is safe only
    with the sticky bit, as /tmp has it)."""
    check_guarded(store)
    for parent in ownership.decisive_dirs(store):
        if parent == Path(os.path.realpath(store)):
            continue  # the store itself: check_guarded's, without the sticky exception
        try:
            info = os.stat(parent)
        except OSError:
            continue
        found = ownership.problem(info, str(parent))
        if found is None:
            continue
        if found.writers:
            who = "anyone" if found.writers == "others" else found.writers
            raise TrustConfigError(
                f"trust store {store} lies in {parent}, which {who} can write (mode "
                f"{stat.S_IMODE(info.st_mode):o}, no sticky bit): {who} could put another "
                f"store in its place; run: {found.fix}")
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
    belong to this user or root and be writable by nobody else (by `acxfs.safe.ownership`'s
    rule, without its sticky exception: every entry here is read; writable by the user's
    personal group is allowed, the usual Debian set-up), and lie on `device`, the store
    directory's (a filesystem mounted inside the store, an unsigned cartridge over `keys/`
    say, would choose them too)."""
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
    found = ownership.problem(info, str(path), sticky_ok=False)
    if found is None:
        return
    if not found.writers:
        raise TrustConfigError(
            f"trust store {path} belongs to uid {info.st_uid}, not to you or root: whoever owns "
            "it chooses which keys you trust")
    who = "anyone" if found.writers == "others" else found.writers
    raise TrustConfigError(
        f"trust store {path} is writable by {who} (mode {stat.S_IMODE(info.st_mode):o}): "
        f"{who} could choose which keys you trust; run: {found.fix}")


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
            warn(f"pinned key {pin_file} ({pin.keyid}) names no publisher and is ignored; "
                      f"pin the key again for its publisher: acxfs trust add KEY.pub.pem "
                      "--publisher ID")
            continue
        pins.append(pin)
    return pins


