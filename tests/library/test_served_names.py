"""A revision's served name: one path component, readable, and never the same for two
identities, versions or store files whose names tell them apart."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from acxfs.container import SEGMENT_RE
from acxfs.library.store.served_names import NAME_MAX, earlier_path, is_served_name, served_name

SEGMENT = st.from_regex(SEGMENT_RE, fullmatch=True)
IDENTITY = st.one_of(SEGMENT, st.tuples(SEGMENT, SEGMENT).map("/".join))
DIGEST = st.text("0123456789abcdef", min_size=64, max_size=64)
# Few letters, so that names which could run together are drawn often.
NARROW = st.from_regex(r"[a1][a1.-]{0,3}", fullmatch=True)
NARROW_IDENTITY = st.one_of(NARROW, st.tuples(NARROW, NARROW).map("/".join))
NARROW_DIGEST = st.text("01", min_size=64, max_size=64)


def test_a_cartridge_is_served_under_its_identity_version_and_digest() -> None:
    name = served_name("io.github.alice/pdf-tools", "1.2.0-rc.1", "ab" * 32)
    assert name == "io.github.alice+pdf-tools@1.2.0-rc.1-abababababab"


def test_a_name_too_long_for_a_file_name_is_the_whole_digest() -> None:
    digest = "cd" * 32
    assert served_name("p" * 128 + "/" + "a" * 128, "1.0.0", digest) == digest
    assert len(served_name("p" * 100 + "/" + "a" * 100, "1.0.0", digest)) <= NAME_MAX


@given(IDENTITY, SEGMENT, DIGEST)
def test_a_served_name_is_one_path_component(identity: str, version: str, digest: str) -> None:
    name = served_name(identity, version, digest)
    assert "/" not in name and name not in (".", "..") and len(name.encode()) <= NAME_MAX
    assert is_served_name(name) and not is_served_name(earlier_path(identity, version, digest))


@given(NARROW_IDENTITY, NARROW, NARROW_DIGEST, NARROW_IDENTITY, NARROW, NARROW_DIGEST)
def test_two_served_names_are_equal_only_for_one_identity_and_version(
        one: str, one_version: str, one_digest: str,
        other: str, other_version: str, other_digest: str) -> None:
    """Equal names mean one identity and version whose digests begin alike, or one digest."""
    if served_name(one, one_version, one_digest) == served_name(other, other_version,
                                                                other_digest):
        assert one_digest == other_digest or (
            (one, one_version, one_digest[:12]) == (other, other_version, other_digest[:12]))
