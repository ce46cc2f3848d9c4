"""JSON from files acxfs does not control has one meaning (`acxfs.safe.strict_json`): a key
given twice in any object, at any depth and however it is spelled, and NaN or Infinity (also
as a number too large for a float) are refused with ValueError; everything else reads as
`json.loads` reads it."""

from __future__ import annotations

import json

import pytest

from acxfs.safe import strict_json


@pytest.mark.parametrize("text", [
    '{"status": "active", "status": "revoked"}',
    '{"keys": [{"keyid": "a", "publisherId": "x", "publisherId": "y"}]}',
    '{"a": {"b": {"c": 1, "c": 1}}}',  # the same value twice is still two keys
    '{"status": 1, "st\\u0061tus": 2}',  # spelled differently, the same key once decoded
    '[{"x": 1}, {"y": 1, "y": 2}]',
])
def test_a_key_given_twice_is_refused_at_any_depth(text: str) -> None:
    with pytest.raises(ValueError, match="duplicate key"):
        strict_json.loads(text)
    json.loads(text)  # what Python alone would have accepted, keeping the last value


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"x": -Infinity}', '{"n": [1, NaN]}'])
def test_nan_and_infinity_are_not_json(text: str) -> None:
    with pytest.raises(ValueError, match="is not JSON"):
        strict_json.loads(text)


@pytest.mark.parametrize("text", ["1e400", '{"x": [-1.5e309]}', "1" * 400 + ".0"],
                         ids=["exponent", "nested-negative", "400-digits"])
def test_a_number_too_large_for_a_float_is_no_infinity_in_disguise(text: str) -> None:
    with pytest.raises(ValueError, match="out of range"):
        strict_json.loads(text)


@pytest.mark.parametrize("text", ["", "{", "[1,]", "{'a': 1}", '{"a": 1} x', "nan"])
def test_what_is_not_json_at_all_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        strict_json.loads(text)


@pytest.mark.parametrize("text", [
    '{"a": 1, "b": {"a": 2}, "c": [{"a": 3}, {"a": 4}]}',  # one key in each object
    '[1, 2.5, -0, 1e308, -0.0, 4.9e-324, 1e-400, "x", true, false, null]',
    '"\\ud83d\\ude00"', "{}", "[]", "0",
])
def test_everything_else_reads_as_json_reads_it(text: str) -> None:
    assert strict_json.loads(text) == json.loads(text)


def test_the_document_keeps_its_key_order() -> None:
    doc = strict_json.loads('{"z": 1, "a": 2, "m": 3}')
    assert isinstance(doc, dict) and list(doc) == ["z", "a", "m"]
