"""Parsing `oci://HOST[:PORT]/REPO[:TAG|@sha256:DIGEST]`: the distribution spec's patterns for
REPO and TAG, a digest as `sha256:` and 64 lowercase hex digits, `oci+http://` for loopback only
(refused by name, before any connection), Docker Hub's names, and the key acxfs records.
"""

from __future__ import annotations

import pytest

from acxfs.errors import EnvironmentProblem, NetworkError
from acxfs.sources.oci.reference import oci_key, parse_ref, version_tag

SHAPE = "oci://HOST[:PORT]/REPO[:TAG|@sha256:DIGEST]"
DIGEST = "sha256:" + "0123456789abcdef" * 4


def test_a_repository_with_a_tag_names_its_host_repo_and_api() -> None:
    ref = parse_ref("oci://Registry.Example.com:5000/skills/research:1.2.0_build.7")
    assert (ref.plain, ref.host, ref.repo, ref.tag, ref.digest) == (
        False, "registry.example.com:5000", "skills/research", "1.2.0_build.7", None)
    assert ref.key == "oci://registry.example.com:5000/skills/research"
    assert ref.text == "oci://registry.example.com:5000/skills/research:1.2.0_build.7"
    assert ref.api == "https://registry.example.com:5000/v2/"
    assert (ref.hostname, ref.credential_host) == ("registry.example.com",
                                                   "registry.example.com:5000")


def test_a_digest_reference_has_no_tag() -> None:
    ref = parse_ref(f"oci://ghcr.io/me/research@{DIGEST}")
    assert (ref.repo, ref.tag, ref.digest) == ("me/research", None, DIGEST)
    assert ref.text == f"oci://ghcr.io/me/research@{DIGEST}"
    assert ref.at_tag("latest").text == "oci://ghcr.io/me/research:latest"


def test_docker_hub_is_asked_as_registry_1_with_library_and_index_credentials() -> None:
    ref = parse_ref("oci://docker.io/research")
    assert (ref.repo, ref.api, ref.credential_host) == (
        "library/research", "https://registry-1.docker.io/v2/", "https://index.docker.io/v1/")
    assert parse_ref("oci://docker.io/me/research").repo == "me/research"


@pytest.mark.parametrize("host", ["127.0.0.1:5000", "localhost:5000", "[::1]:5000", "[::1]"])
def test_plain_http_is_accepted_for_loopback(host: str) -> None:
    ref = parse_ref(f"oci+http://{host}/skills/foo")
    assert ref.plain and ref.api == f"http://{host}/v2/"
    assert ref.key == f"oci+http://{host}/skills/foo"


@pytest.mark.parametrize("host", ["registry.example.com", "127.1:5000", "10.0.0.1:5000",
                                  "localhost.example.com"])
def test_plain_http_to_another_host_is_refused(host: str) -> None:
    with pytest.raises(NetworkError) as refused:
        parse_ref(f"oci+http://{host}/skills/foo:1.0.0")
    assert str(refused.value) == f"oci+http://{host}/skills/foo: plain HTTP only for loopback"


@pytest.mark.parametrize("text", [
    "oci:/registry.example.com/foo",
    "oci://registry.example.com",
    "oci://registry.example.com/",
    "oci://registry.example.com/Skills",
    "oci://registry.example.com/skills//foo",
    "oci://registry.example.com/skills/foo/",
    "oci://registry.example.com/a___b",
    "oci://registry.example.com/-foo",
    "oci://registry.example.com/foo:",
    "oci://registry.example.com/foo:-tag",
    "oci://registry.example.com/foo:" + "t" * 129,
    "oci://registry.example.com/foo:bad:tag",
    "oci://registry.example.com/foo@sha256:" + "A" * 64,
    "oci://registry.example.com/foo@sha256:" + "0" * 63,
    "oci://registry.example.com/foo@sha512:" + "0" * 128,
    f"oci://registry.example.com/foo:1.0.0@{DIGEST}",
    "oci://-registry.example.com/foo",
    "oci://registry.example.com:99999/foo",
    "oci://registry.example.com:0/foo",
    "oci://registry.example.com/foo?x=1",
    "https://registry.example.com/foo",
    "oci://registry.example.com/" + "a/" * 130 + "a",
])
def test_a_malformed_reference_is_refused_with_the_shape(text: str) -> None:
    with pytest.raises(EnvironmentProblem) as refused:
        parse_ref(text)
    assert str(refused.value) == f"{text}: not an OCI reference ({SHAPE})"


def test_a_tag_of_128_characters_and_separated_components_are_accepted() -> None:
    ref = parse_ref("oci://r.example/a.b/c__d/e-f/g--h:" + "T" * 128)
    assert (ref.repo, ref.tag) == ("a.b/c__d/e-f/g--h", "T" * 128)


def test_a_version_tag_writes_build_metadata_with_an_underscore() -> None:
    assert version_tag("1.2.0+build.7") == "1.2.0_build.7"
    assert version_tag("1.2.0-rc.1") == "1.2.0-rc.1"


def test_a_key_is_a_repository_without_tag_or_digest() -> None:
    assert oci_key("oci://ghcr.io/me/research")
    assert not oci_key("oci://ghcr.io/me/research:1.0.0")
    assert not oci_key(f"oci://ghcr.io/me/research@{DIGEST}")
    assert not oci_key("oci://GHCR.io/me/research")  # not as acxfs records it
    assert not oci_key("oci+http://example.com/me/research")


def test_user_information_in_a_reference_is_never_echoed() -> None:
    with pytest.raises(EnvironmentProblem) as refused:
        parse_ref("oci://user:hunter2@registry.example.com/foo")
    assert "hunter2" not in str(refused.value)
    assert str(refused.value) == (f"oci://***@registry.example.com/foo: not an OCI reference "
                                  f"({SHAPE})")


@pytest.mark.parametrize(("text", "key"), [
    ("oci://Registry.Example.com:443/foo", "oci://registry.example.com/foo"),
    ("oci://registry.example.com:0443/foo:1.0.0", "oci://registry.example.com/foo"),
    ("oci://registry.example.com:05000/foo", "oci://registry.example.com:5000/foo"),
    ("oci+http://127.0.0.1:080/foo", "oci+http://127.0.0.1:80/foo"),
    ("oci://registry-1.docker.io/alpine", "oci://docker.io/library/alpine"),
    ("oci://index.docker.io/me/tools", "oci://docker.io/me/tools"),
])
def test_one_registry_has_one_key_however_it_is_spelled(text: str, key: str) -> None:
    """The memory and policy of a repository cannot be sidestepped by another spelling."""
    assert parse_ref(text).key == key
