"""Conditional requests are asked only for the documents read again each round (an OCI
manifest or tag list, an index, a ledger, a feed): a bearer token a registry's token server
hands out with an `ETag` is asked for unconditionally every time, so a `304` can never
answer a login with a token kept from an earlier command.
"""

from __future__ import annotations

import json
from pathlib import Path

from acxfs.sources.http import Http
from acxfs.sources.oci.reference import parse_ref
from acxfs.sources.oci.repository import Repository
from acxfs.sources.revalidate import Revalidator
from tests.support.servers import Reply, Scripted

MANIFEST = json.dumps({"schemaVersion": 2, "layers": []}).encode()
TOKEN = json.dumps({"token": "t0ken"}).encode()


class TokenRegistry:
    """A registry on loopback whose every answer carries an ETag (answering `304` to it),
    behind a bearer challenge pointing at its own `/token`."""

    def __init__(self) -> None:
        self.base = ""
        self.server = Scripted(self.route)

    def route(self, path: str) -> Reply:
        asked = self.server.requests[-1].headers
        if path.startswith("/token"):
            return self.tagged(TOKEN, '"token-1"', asked)
        if asked.get("Authorization") != "Bearer t0ken":
            return Reply(401, b"", {"WWW-Authenticate":
                                    f'Bearer realm="{self.base}token",service="test"'})
        return self.tagged(MANIFEST, '"manifest-1"', asked)

    @staticmethod
    def tagged(body: bytes, etag: str, asked: dict[str, str]) -> Reply:
        headers = {"ETag": etag, "Content-Type": "application/json"}
        return Reply(304, b"", headers) if asked.get("If-None-Match") == etag else \
            Reply(200, body, headers)

    def asked(self, prefix: str) -> list[str | None]:
        """The If-None-Match of each request whose path starts with `prefix`."""
        return [r.headers.get("If-None-Match") for r in self.server.requests
                if r.path.startswith(prefix)]


def test_a_token_is_asked_unconditionally_and_a_manifest_conditionally(
        tmp_path: Path) -> None:
    registry = TokenRegistry()
    with registry.server.running() as base:
        registry.base = base
        ref = parse_ref(f"oci+http://{base.split('/')[2]}/skills/foo:1.0.0")
        for _ in range(2):  # two commands: each logs in anew, one cache between them
            http = Http(timeout=5, revalidator=Revalidator(tmp_path / "cache"))
            assert Repository(ref, http).manifest("1.0.0") == MANIFEST
    assert registry.asked("/token") == [None, None]
    # Each command asks without a token first (the 401 challenge), then with it: only the
    # request with the same token carries the validator of the body that token was sent.
    assert registry.asked("/v2/") == [None, None, None, '"manifest-1"']


def test_a_body_kept_for_one_login_never_answers_another(tmp_path: Path) -> None:
    """Two logins ask one URL, whose every answer carries the same ETag: the second login's
    request carries no validator of the first's body, so it gets its own body, never a `304`
    that would hand it the first login's."""
    bodies = {"Bearer alice": b'{"for": "alice"}', "Bearer bob": b'{"for": "bob"}'}

    def route(path: str) -> Reply:
        asked = server.requests[-1].headers
        body = bodies.get(asked.get("Authorization", ""), b"{}")
        return TokenRegistry.tagged(body, '"same-etag"', asked)

    server = Scripted(route)
    with server.running() as base:
        for login in ("Bearer alice", "Bearer bob", "Bearer alice", "Bearer bob"):
            http = Http(timeout=5, revalidator=Revalidator(tmp_path / "cache"),
                        headers={"Authorization": login})
            answer = http.request("GET", f"{base}index.json", revalidate=True)
            assert answer.body == bodies[login]
    assert [r.headers.get("If-None-Match") for r in server.requests] == [
        None, None, '"same-etag"', '"same-etag"']
    kept = [p.read_bytes() for p in (tmp_path / "cache").iterdir()]
    assert len(kept) == 2 and not any(b"Bearer" in entry for entry in kept)
