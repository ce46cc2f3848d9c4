"""`policy.json`: what a user's or a machine's library may install, whatever the command says.

Invariant: the policy is the trust store's `policy.json` and `/etc/acxfs/policy.json` (root's),
both applying; each is read like a trust store file (owned by the user or root, not writable
by others, bounded, strict JSON) and an unusable one stops every library command (exit 2).
Keys are optional (absent: no limit).  `sources` is compared normalised, before any network
access; `publishers` (a name covers its sub-namespaces) before a download and on the signed
publisher; `keyids` after the check; `"files": false` refuses bundle files.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from acxfs.errors import PolicyRefusal, StaleIndexError, TrustConfigError
from acxfs.safe import strict_json
from acxfs.safe.inputs import open_input
from acxfs.sources.oci.reference import is_oci
from acxfs.sources.spec import normalise
from acxfs.trust.store import check_guarded, check_guarded_path

SCHEMA = "acxfs.policy/1"
SYSTEM = Path("/etc/acxfs/policy.json")
POLICY_BYTES = 256 * 1024
KEYS = {"schemaVersion", "sources", "publishers", "keyids", "files", "withdrawn",
        "maxIndexAgeDays"}


@dataclass(frozen=True)
class Rule:
    """One policy file."""

    path: str
    sources: tuple[str, ...] | None = None
    publishers: tuple[str, ...] | None = None
    keyids: tuple[str, ...] | None = None
    files: bool = True
    withdrawn: str = "refuse"
    max_index_age_days: int | None = None

    def describe(self) -> list[str]:
        lines = [f"policy {self.path}:"]
        for label, value in (("sources", self.sources), ("publishers", self.publishers),
                             ("keyids", self.keyids)):
            lines.append(f"  {label}: {'any' if value is None else ', '.join(value) or 'none'}")
        lines.append(f"  local files: {'allowed' if self.files else 'refused'}")
        lines.append(f"  withdrawn releases: {self.withdrawn}")
        if self.max_index_age_days is not None:
            lines.append(f"  index at most {self.max_index_age_days} days old")
        return lines


@dataclass(frozen=True)
class Policy:
    """Every policy file in effect; each must allow what acxfs does."""

    rules: tuple[Rule, ...] = ()

    @property
    def warn_withdrawn(self) -> bool:
        return bool(self.rules) and all(r.withdrawn == "warn" for r in self.rules)

    def check_source(self, key: str) -> None:
        """`key` must be one of each rule's sources; an OCI repository may also lie below
        one (`oci://HOST/PATH` covers whole segments: `oci://h/team` covers `oci://h/team/x`,
        not `oci://h/teamx`)."""
        for r in self.rules:
            if r.sources is not None and key not in r.sources and not (
                    is_oci(key) and any(key.startswith(s + "/") for s in r.sources
                                        if is_oci(s))):
                raise PolicyRefusal(f"{r.path}: source {key} is not allowed")

    def check_publisher(self, publisher: str | None) -> None:
        for r in self.rules:
            if r.publishers is not None and not any(
                    publisher is not None and (publisher == p or publisher.startswith(p + "."))
                    for p in r.publishers):
                raise PolicyRefusal(f"{r.path}: publisher {publisher or '(none)'} is not "
                                    "allowed")

    def check_keyid(self, keyid: str) -> None:
        for r in self.rules:
            if r.keyids is not None and keyid not in r.keyids:
                raise PolicyRefusal(f"{r.path}: keyid {keyid} is not allowed")

    def check_files(self) -> None:
        for r in self.rules:
            if not r.files:
                raise PolicyRefusal(f"{r.path}: local files are not allowed")

    def refusal_of(self, source: str | None, publisher: str | None,
                   keyid: str) -> str | None:
        """Why the policy no longer allows an installed revision (None: it does)."""
        try:
            if source is None:
                self.check_files()
            else:
                self.check_source(source)
            self.check_publisher(publisher)
            self.check_keyid(keyid)
        except PolicyRefusal as exc:
            return str(exc)
        return None

    def check_index_age(self, where: str, generated: dt.datetime) -> None:
        now = dt.datetime.now(dt.UTC)
        for r in self.rules:
            if r.max_index_age_days is not None and \
                    now - generated > dt.timedelta(days=r.max_index_age_days):
                raise StaleIndexError(f"{r.path}: {where} was generated "
                                    f"{generated.isoformat()}, more than "
                                    f"{r.max_index_age_days} days ago")


def load_policy(trust_dir: Path, system: Path = SYSTEM) -> Policy:
    rules = [r for r in (_load(system, system_wide=True),
                         _load(trust_dir / "policy.json", system_wide=False)) if r]
    return Policy(tuple(rules))


def _load(path: Path, system_wide: bool) -> Rule | None:
    if not path.exists() and not path.is_symlink():
        return None
    check_guarded_path(path.parent)
    check_guarded(path)
    try:
        if system_wide and path.stat().st_uid != 0:
            raise ValueError("not owned by root")
        with open_input(path) as f:
            data = f.read(POLICY_BYTES + 1)
        if len(data) > POLICY_BYTES:
            raise ValueError(f"larger than {POLICY_BYTES} bytes")
        doc = strict_json.loads(data.decode("utf-8"))
        return _rule(str(path), doc)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise TrustConfigError(f"{path}: unusable policy ({exc}); every library command "
                               "stops until it is fixed") from None


def _rule(path: str, doc: object) -> Rule:
    if not isinstance(doc, dict) or doc.get("schemaVersion") != SCHEMA:
        raise ValueError(f"not {SCHEMA}")
    unknown = set(doc) - KEYS
    if unknown:
        raise ValueError(f"unknown key {sorted(unknown)[0]!r}")

    def texts(key: str) -> tuple[str, ...] | None:
        value = doc.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ValueError(f"{key}: not a list of names")
        return tuple(value)

    sources = texts("sources")
    files = doc.get("files", True)
    withdrawn = doc.get("withdrawn", "refuse")
    age = doc.get("maxIndexAgeDays")
    if not isinstance(files, bool):
        raise ValueError("files: not true or false")
    if withdrawn not in ("refuse", "warn"):
        raise ValueError('withdrawn: not "refuse" or "warn"')
    if age is not None and (not isinstance(age, int) or isinstance(age, bool) or age < 0):
        raise ValueError("maxIndexAgeDays: not a whole number of days")
    return Rule(path, None if sources is None else tuple(normalise(s) for s in sources),
                texts("publishers"), texts("keyids"), files, str(withdrawn), age)
