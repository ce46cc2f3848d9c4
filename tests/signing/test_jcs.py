"""RFC 8785 (JCS) canonical JSON as ACX signs it (`acxfs.signing.jcs`): vectors written from
the RFC's rules (section 3.2): no whitespace; object members sorted by the UTF-16 code units
of their names, recursively; strings escaped as ECMAScript's JSON.stringify does (the two-char
escapes for \\b \\t \\n \\f \\r \\" \\\\, lower-case \\u00xx for the other controls, every
other character as itself, non-ASCII included); literals as they are; integers in plain
decimal. Non-integral numbers, which ACX 0.1 never signs, and lone surrogates are refused.
"""

from __future__ import annotations

import pytest

from acxfs.signing.jcs import canonical_bytes, utf16_key


def test_the_rfcs_sorting_example_orders_names_by_utf16_code_units() -> None:
    # RFC 8785 section 3.2.3: by code point U+1F600 would sort after U+FB33; its UTF-16
    # surrogates D83D DE00 sort before FB33.
    names = ["\u20ac", "\r", "\ufb33", "1", "\U0001f600", "\u0080", "\u00f6"]
    doc = {name: f"v{i}" for i, name in enumerate(names)}
    out = canonical_bytes(doc).decode("utf-8")
    order = ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]
    assert out == ('{"\\r":"v1","1":"v3","\u0080":"v5","\u00f6":"v6","\u20ac":"v0",'
                   '"\U0001f600":"v4","\ufb33":"v2"}')
    assert sorted(names, key=utf16_key) == order
    assert sorted(names) != order  # code point order differs: the test can tell them apart


def test_the_rfcs_string_example_is_escaped_as_json_stringify_does() -> None:
    # RFC 8785 section 3.2.2.2, the "string" member of its example
    value = "\u20ac$\u000f\u000aA'\u0042\u0022\u005c\\\"/"
    assert canonical_bytes(value) == '"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"'.encode()


@pytest.mark.parametrize(("char", "escaped"), [
    ("\b", "\\b"), ("\t", "\\t"), ("\n", "\\n"), ("\f", "\\f"), ("\r", "\\r"),
    ('"', '\\"'), ("\\", "\\\\"), ("\x00", "\\u0000"), ("\x1f", "\\u001f"), ("\x0b", "\\u000b"),
    ("/", "/"), ("\x7f", "\x7f"), ("\u2028", "\u2028"), ("\u00e9", "\u00e9"),
    ("\U0001f600", "\U0001f600"),
])
def test_each_character_is_escaped_only_where_json_stringify_escapes_it(char: str,
                                                                       escaped: str) -> None:
    assert canonical_bytes(char) == f'"{escaped}"'.encode()


def test_the_rfcs_literals_and_whitespace_rules() -> None:
    # RFC 8785 appendix: "literals": [null, true, false], no whitespace anywhere
    assert canonical_bytes({"literals": [None, True, False]}) == \
        b'{"literals":[null,true,false]}'
    assert canonical_bytes({"b": [], "a": {}}) == b'{"a":{},"b":[]}'


def test_nested_objects_are_sorted_at_every_level_and_arrays_keep_their_order() -> None:
    doc = {"z": {"b": 1, "a": [3, {"y": 0, "x": 0}, 1]}, "a": None}
    assert canonical_bytes(doc) == b'{"a":null,"z":{"a":[3,{"x":0,"y":0},1],"b":1}}'


def test_the_bytes_are_utf8_and_non_ascii_is_never_escaped() -> None:
    assert canonical_bytes({"name": "io.github.中文"}) == \
        '{"name":"io.github.中文"}'.encode()


@pytest.mark.parametrize(("number", "text"), [
    (0, "0"), (-0.0, "0"), (7, "7"), (-12, "-12"), (1e2, "100"), (4.0, "4"),
    (2**53 - 1, "9007199254740991"), (float(2**53 - 1), "9007199254740991"),
    (123456789012, "123456789012"),
])
def test_integers_are_plain_decimal(number: float, text: str) -> None:
    assert canonical_bytes(number) == text.encode()
    assert canonical_bytes([number]) == f"[{text}]".encode()


@pytest.mark.parametrize("number", [4.5, 0.002, 1e-27, 333333333.33333329, 1e30,
                                    float(2**53), float("inf"), float("nan")])
def test_numbers_acx_never_signs_are_refused(number: float) -> None:
    with pytest.raises(ValueError):
        canonical_bytes({"n": number})


def test_booleans_are_literals_not_integers() -> None:
    assert canonical_bytes([True, 1, False, 0]) == b"[true,1,false,0]"


def test_a_lone_surrogate_has_no_canonical_form() -> None:
    with pytest.raises(ValueError, match="surrogate"):
        canonical_bytes({"x": "\ud800"})


def test_a_value_json_cannot_hold_is_refused() -> None:
    with pytest.raises(TypeError):
        canonical_bytes({"x": b"bytes"})
    with pytest.raises(TypeError):
        canonical_bytes({"x": {1, 2}})
