"""JSON as acxfs accepts it from files it does not control: one meaning per document.

Invariant: `loads` returns only documents whose every object has distinct keys and which
hold no NaN or Infinity; anything else raises ValueError.  Python's `json` would keep the
last of two equal keys silently, so a second `"status"` or `"publisherId"` could change what
a registry entry or a pin says without any reader noticing.
"""

from __future__ import annotations

import json
import math


def _distinct_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    doc: dict[str, object] = {}
    for key, value in pairs:
        if key in doc:
            raise ValueError(f"duplicate key {key!r}")
        doc[key] = value
    return doc


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400: a number too large for a float reads as Infinity
        raise ValueError(f"{text[:40]} is out of range")
    return value


def loads(text: str) -> object:
    """`json.loads`, refusing duplicate keys and NaN/Infinity, also as an out-of-range number
    (ValueError)."""
    return json.loads(text, object_pairs_hook=_distinct_keys, parse_constant=_no_constant,
                      parse_float=_finite)
