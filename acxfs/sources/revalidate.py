"""Conditional GETs: what a server answered last time, kept so that an unchanged index,
ledger, feed, tag list or manifest costs a `304 Not Modified` and no body.

Invariant: an entry holds a body a server sent with `200` for one URL (and one `Accept`, and
one credential: the sha256 of the request's `Authorization`, never the credential itself),
within the bound of the request that read it, with the validators the server gave for it
(`ETag`, else a `Last-Modified` at least a second older than the answer's `Date`,
which the body cannot have outrun); it is handed back only when that server answers `304` to
those validators, and then as the untrusted bytes it always was: its reader parses and
checks it as if it had just arrived (rollback, coordinates, bounds).  The cache lies in a
directory only its owner can enter; an entry that cannot be read back exactly (damaged,
another URL's, over the bound) is a miss, never an error.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from acxfs.errors import AcxfsError
from acxfs.safe import dirs as safe_dirs
from acxfs.safe import files as safe_files
from acxfs.safe import ownership

HEADER_LIMIT = 16 * 1024  # the entry's first line: the URL and its validators


@dataclass(frozen=True)
class Cached:
    """A body as the server last sent it, with the validators to ask whether it changed."""

    body: bytes
    etag: str | None
    last_modified: str | None
    content_type: str | None

    def validators(self) -> dict[str, str]:
        """The conditional headers: `If-None-Match` when the server gave an ETag, else
        `If-Modified-Since`."""
        if self.etag:
            return {"If-None-Match": self.etag}
        if self.last_modified:
            return {"If-Modified-Since": self.last_modified}
        return {}


@dataclass(frozen=True)
class Revalidator:
    """The conditional-request cache in `directory` (made private on the first store)."""

    directory: Path

    @staticmethod
    def _key(url: str, accept: str, credential: str) -> tuple[str, str]:
        """The entry's file name, and what it records of `credential` (its sha256, "" for
        none: an entry asked without one keeps the name it always had)."""
        if not credential:
            return hashlib.sha256(f"{url}\n{accept}".encode()).hexdigest(), ""
        digest = "sha256:" + hashlib.sha256(credential.encode()).hexdigest()
        return hashlib.sha256(f"{url}\n{accept}\n{digest}".encode()).hexdigest(), digest

    def get(self, url: str, accept: str, limit: int, credential: str = "") -> Cached | None:
        """The entry for `url` asked with `credential` (the request's `Authorization`; None:
        a miss, however the entry is broken)."""
        try:
            fd = safe_dirs.open_dir(self.directory)
        except (OSError, AcxfsError):
            return None
        try:
            with contextlib.suppress(OSError, ValueError, UnicodeDecodeError):
                return self._read(fd, url, accept, credential, limit)
        finally:
            os.close(fd)
        return None

    def _read(self, fd: int, url: str, accept: str, credential: str,
              limit: int) -> Cached | None:
        name, asker = self._key(url, accept, credential)
        entry = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        with os.fdopen(entry, "rb") as handle:
            header = json.loads(handle.readline(HEADER_LIMIT).decode("utf-8"))
            body = handle.read(limit + 1)
        if not isinstance(header, dict) or header.get("url") != url or \
                header.get("accept") != accept or header.get("credential", "") != asker or \
                len(body) > limit or header.get("bytes") != len(body):
            return None
        fields = [header.get(k) for k in ("etag", "lastModified", "contentType")]
        if not all(f is None or isinstance(f, str) for f in fields):
            return None
        etag, modified, kind = (f if isinstance(f, str) else None for f in fields)
        return Cached(body, etag, modified, kind)

    def put(self, url: str, accept: str, cached: Cached, credential: str = "") -> None:
        """Keep `cached` for `url` asked with `credential` (best effort: a cache that cannot
        be written is no cache)."""
        if not cached.validators():
            return
        name, asker = self._key(url, accept, credential)
        header = {"url": url, "accept": accept, "credential": asker, "etag": cached.etag,
                  "lastModified": cached.last_modified, "contentType": cached.content_type,
                  "bytes": len(cached.body)}
        data = json.dumps(header, sort_keys=True).encode() + b"\n" + cached.body
        with contextlib.suppress(OSError, ValueError, AcxfsError), \
                ownership.make_dirs(self.directory, 0o700) as made:
            safe_files.replace_file_at(made.fd, name, data, 0o600)
