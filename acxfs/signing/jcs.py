"""RFC 8785 canonical JSON for the values ACX manifests and statements hold.

Keys sorted by UTF-16 code units, no whitespace, strings escaped as JavaScript's
JSON.stringify does (non-ASCII kept as is), integers in plain decimal.  Floats other than
integral ones are refused: ACX 0.1 signs none, and their ES6 rendering is not needed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

_PLAIN = re.compile(r"[ !#-\[\]-~]*")  # printable ASCII but '"' and '\\': no escape needed


def canonical_bytes(value: object) -> bytes:
    """The JCS serialization of `value` as UTF-8 bytes (ValueError if it has none)."""
    try:
        return _emit(value).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError("string with a lone surrogate") from exc


def utf16_key(text: str) -> bytes:
    """A sort key that orders strings as JavaScript compares them (UTF-16 code units)."""
    return text.encode("utf-16-be")


def _emit(value: object) -> str:
    if isinstance(value, str):
        return f'"{value}"' if _PLAIN.fullmatch(value) else json.dumps(value, ensure_ascii=False)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 2**53:
            return str(int(value))
        raise ValueError("non-integral numbers are not used in ACX 0.1 signed JSON")
    if isinstance(value, Mapping):
        items = sorted(value.items(), key=lambda kv: utf16_key(str(kv[0])))
        return "{" + ",".join(f"{_emit(str(k))}:{_emit(v)}" for k, v in items) + "}"
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return "[" + ",".join(_emit(v) for v in value) + "]"
    raise TypeError(f"cannot serialize {type(value).__name__} as JSON")
