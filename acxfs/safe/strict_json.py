"""JSON as acxfs accepts it from files it does not control: one meaning per document.

Invariant: `loads` returns only documents whose every object has distinct keys and which
hold no NaN or Infinity (and, given `max_depth`, no object or list nested deeper, checked on
the text before it is parsed: the parser recurses); anything else raises ValueError.
Python's `json` would keep the last of two equal keys silently, so a second `"status"` or
`"publisherId"` could change what a registry entry or a pin says without any reader
noticing.
"""

from __future__ import annotations

import itertools
import json
import math
import re

# A JSON string, escapes included (brackets inside one do not nest anything).
_STRING = re.compile(r'"(?:[^"\\]+|\\.)*"', re.DOTALL)
# Each bracket as its step in depth; every other byte dropped.
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_NOT_BRACKETS = bytes(b for b in range(256) if b not in _STEP)


def _distinct_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    doc: dict[str, object] = {}
    for key, value in pairs:
        if key in doc:
            raise ValueError(f"duplicate key {key!r}")
        doc[key] = value
    return doc


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def check_depth(text: str, max_depth: int) -> None:
    """ValueError when objects and lists nest deeper than `max_depth` in `text` (brackets
    inside strings do not count)."""
    brackets = _STRING.sub("", text).encode("utf-8", "surrogatepass").translate(
        None, _NOT_BRACKETS)
    if brackets and max(itertools.accumulate(map(_STEP.__getitem__, brackets))) > max_depth:
        raise ValueError(f"nested deeper than {max_depth} levels")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400: a number too large for a float reads as Infinity
        raise ValueError(f"{text[:40]} is out of range")
    return value


def loads(text: str, max_depth: int | None = None) -> object:
    """`json.loads`, refusing duplicate keys, NaN/Infinity (also as an out-of-range number)
    and, given `max_depth`, deeper nesting (ValueError)."""
    if max_depth is not None:
        check_depth(text, max_depth)
    return json.loads(text, object_pairs_hook=_distinct_keys, parse_constant=_no_constant,
                      parse_float=_finite)


def loads_object(data: bytes, max_depth: int | None = None) -> dict[str, object]:
    """UTF-8 `data` as one strict JSON object; ValueError saying why not (`not strict JSON
    (...)`, `not a JSON object`), for the caller to prefix with what it read."""
    try:
        doc = loads(data.decode("utf-8"), max_depth)
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 (byte {exc.start})") from None
    except ValueError as exc:
        raise ValueError(f"not strict JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    return doc
