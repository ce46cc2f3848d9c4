"""SemVer 2.0.0: the spec's own precedence examples, its grammar's refusals, and properties
(precedence is a total order equal to the order of an independent tuple; text that parses is
exactly what the spec's official regular expression accepts)."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acxfs.errors import InputError, VersionError
from acxfs.semver import MAX_LENGTH, Version, is_semver, parse

# semver.org's "suggested regular expression", verbatim (\d made ASCII-only by re.ASCII).
OFFICIAL = re.compile(
    r"^(?P<major>0|[1-9]\d*)\.(?P<minor>0|[1-9]\d*)\.(?P<patch>0|[1-9]\d*)"
    r"(?:-(?P<prerelease>(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
    r"(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+(?P<buildmetadata>[0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$",
    re.ASCII,
)

SPEC_PRERELEASE_CHAIN = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta",
                         "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0"]
SPEC_RELEASE_CHAIN = ["1.0.0", "2.0.0", "2.1.0", "2.1.1"]


@pytest.mark.parametrize("chain", [SPEC_PRERELEASE_CHAIN, SPEC_RELEASE_CHAIN])
def test_the_specs_example_chains_are_strictly_increasing(chain: list[str]) -> None:
    versions = [parse(text) for text in chain]
    for lower, higher in itertools.combinations(versions, 2):
        assert lower < higher and higher > lower, (lower, higher)
        assert lower <= higher and not lower >= higher
        assert lower != higher
    for shuffled in itertools.islice(itertools.permutations(versions), 200):
        assert [v.text for v in sorted(shuffled)] == chain


def test_numeric_identifiers_compare_as_numbers_and_below_alphanumeric_ones() -> None:
    assert parse("1.0.0-2") < parse("1.0.0-10")
    assert parse("1.0.0-999") < parse("1.0.0-a")
    assert parse("1.0.0-9a") > parse("1.0.0-10")  # "9a" is alphanumeric
    assert parse("1.0.0-B") < parse("1.0.0-a")  # ASCII order
    assert parse("0.9.99") < parse("0.10.0") < parse("10.0.0")


def test_build_metadata_is_ignored_but_kept_for_display() -> None:
    plain, one, other = parse("1.0.0"), parse("1.0.0+20130313144700"), parse("1.0.0+exp.sha.5")
    assert plain == one == other
    assert not plain < one and not one < other
    assert len({plain, one, other}) == 1
    assert one.text == "1.0.0+20130313144700" and str(other) == "1.0.0+exp.sha.5"
    assert other.build == ("exp", "sha", "5")
    assert parse("1.0.0-beta+exp.sha.5114f85") == parse("1.0.0-beta")
    assert parse("1.0.0-beta+exp") < parse("1.0.0")


def test_fields_are_parsed() -> None:
    version = parse("1.2.3-rc.10.x-y+build.007")
    assert (version.major, version.minor, version.patch) == (1, 2, 3)
    assert version.prerelease == ("rc", 10, "x-y")
    assert version.build == ("build", "007")  # leading zeros are allowed in build metadata
    assert version.is_prerelease and not parse("1.2.3").is_prerelease
    assert parse("0.0.0-0").prerelease == (0,)


@pytest.mark.parametrize("text", [
    "01.0.0", "1.01.0", "1.0.01", "1.0", "1", "1.0.0.0", "1.0.0-", "1.0.0+", "1.0.0-01",
    "1.0.0-alpha..1", "1.0.0-alpha.", "1.0.0+build..1", "v1.0.0", " 1.0.0", "1.0.0 ",
    "1.0.0\n", "1.0.0-al_pha", "1.0.0-αβ", "١.0.0", "1.0.0-a+b+c", "", "-1.0.0", "1.0.0-+",
])
def test_invalid_forms_are_refused_with_one_line(text: str) -> None:
    assert not is_semver(text)
    with pytest.raises(VersionError) as caught:
        parse(text)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("not a SemVer 2.0.0 version")
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, InputError)


def test_leading_zero_is_named_in_the_refusal() -> None:
    with pytest.raises(VersionError, match="leading zero"):
        parse("01.0.0")
    with pytest.raises(VersionError, match="numeric pre-release identifier has a leading zero"):
        parse("1.0.0-01")
    with pytest.raises(VersionError, match="after '-' is empty"):
        parse("1.0.0-")
    with pytest.raises(VersionError, match="after '\\+' is empty"):
        parse("1.0.0+")


def test_length_is_bounded() -> None:
    longest = "1.0.0-" + "a" * (MAX_LENGTH - 6)
    assert len(longest) == MAX_LENGTH and parse(longest).text == longest
    with pytest.raises(VersionError, match=f"longer than {MAX_LENGTH}"):
        parse(longest + "a")
    with pytest.raises(VersionError):
        parse("1" * 5000 + ".0.0")  # refused by length, before any number is converted


def test_comparison_with_other_types_is_refused() -> None:
    with pytest.raises(TypeError):
        assert parse("1.0.0") < "2.0.0"  # type: ignore[operator]
    assert parse("1.0.0") != "1.0.0"
    with pytest.raises(VersionError):
        parse(100)  # type: ignore[arg-type]


# --- properties ----------------------------------------------------------------------------

numbers = st.integers(min_value=0, max_value=12) | st.integers(min_value=0, max_value=10**20)
alnum = st.text("0123456789abzAZ-", min_size=1, max_size=4).filter(
    lambda s: not s.isdigit())
pre_ident = st.one_of(numbers, alnum)
build_ident = st.text("0123456789abZ-", min_size=1, max_size=4)


@st.composite
def versions(draw: st.DrawFn) -> tuple[str, tuple[object, ...]]:
    """A version's text and its precedence as a plain tuple built from the spec's rules."""
    major, minor, patch = draw(numbers), draw(numbers), draw(numbers)
    pre = draw(st.lists(pre_ident, max_size=3))
    build = draw(st.lists(build_ident, max_size=2))
    text = f"{major}.{minor}.{patch}"
    if pre:
        text += "-" + ".".join(str(i) for i in pre)
    if build:
        text += "+" + ".".join(build)
    # (False, n) sorts before (True, s): numeric identifiers before alphanumeric ones; a
    # release (no pre-release) after all its pre-releases; build metadata absent.
    idents = tuple((isinstance(i, str), i) for i in pre)
    return text, (major, minor, patch, not pre, idents)


def sign(a: Any, b: Any) -> int:
    return int(a > b) - int(a < b)


@settings(max_examples=400, deadline=None)
@given(st.lists(versions(), min_size=3, max_size=3))
def test_precedence_is_a_total_order_equal_to_the_tuple_order(
        drawn: list[tuple[str, tuple[object, ...]]]) -> None:
    parsed = [(parse(text), ref) for text, ref in drawn]
    for (a, ref_a), (b, ref_b) in itertools.product(parsed, repeat=2):
        assert sign(a, b) == sign(ref_a, ref_b), (a, b)
        assert [a < b, a == b, a > b].count(True) == 1  # trichotomy
        assert (a <= b) == (a < b or a == b) and (a >= b) == (a > b or a == b)
        assert (a != b) == (sign(ref_a, ref_b) != 0)
        if a == b:
            assert hash(a) == hash(b)
    in_order = sorted(parsed, key=lambda pair: pair[0])
    refs = [ref for _, ref in in_order]
    assert refs == sorted(refs)  # transitive: sorting by Version sorts the tuples


@settings(max_examples=300, deadline=None)
@given(versions())
def test_rendered_versions_round_trip(drawn: tuple[str, tuple[object, ...]]) -> None:
    text, _ = drawn
    version = parse(text)
    assert version.text == text and is_semver(text)
    assert parse(text.partition("+")[0]) == version
    assert isinstance(version, Version)


@settings(max_examples=1500, deadline=None)
@given(st.text("0123456789.-+aZ_v ", max_size=16) | st.from_regex(OFFICIAL, fullmatch=True))
def test_accepts_exactly_what_the_official_regex_accepts(text: str) -> None:
    expected = len(text) <= MAX_LENGTH and OFFICIAL.match(text) is not None \
        and not text.endswith("\n")  # `$` also matches before a final newline
    assert is_semver(text) == expected, text
    if expected:
        assert parse(text).text == text
