"""JSON as acxfs accepts it from files it does not control: one meaning per document.

Invariant: `loads` returns only documents whose every object has distinct keys and which
hold no NaN or Infinity; anything else raises ValueError.  Python's `json` would keep the
last of two equal keys silently, so a second `"status"` or `"publisherId"` could change what
a registry entry or a pin says without any reader noticing.
"""

from __future__ import annotations

import json


def _distinct_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    doc: dict[str, object] = {}
    for key, value in pairs:
        if key in doc:
            raise ValueError(f"duplicate key {key!r}")
        doc[key] = value
    return doc


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def loads(text: str) -> object:
    """`json.loads`, refusing duplicate keys and NaN/Infinity (ValueError)."""
    return json.loads(text, object_pairs_hook=_distinct_keys, parse_constant=_no_constant)
