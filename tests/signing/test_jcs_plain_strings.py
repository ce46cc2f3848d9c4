"""JCS writes a plain string (printable ASCII without a quote or a backslash) as is, between
quotes, and every other string as JSON.stringify does: the two ways agree on every string.

The plain way is what the check takes for nearly every string it canonicalises at `up` (the
signed cartridge facts); this proves it is the same serialization, character for character,
over random strings drawn from every class that matters (plain, quote, backslash, control
characters, DEL, non-ASCII, U+2028).
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from acxfs.signing.jcs import canonical_bytes

CHARS = st.sampled_from([*map(chr, range(0x20, 0x7F)), '"', "\\", "\x00", "\x1f", "\x7f",
                         "\u00e9", "\u2028", "\U0001f600"])


@given(st.text(CHARS, max_size=40))
def test_a_string_is_written_as_json_stringify_writes_it(text: str) -> None:
    assert canonical_bytes(text) == json.dumps(text, ensure_ascii=False).encode("utf-8")


@given(st.dictionaries(st.text(CHARS, max_size=8), st.text(CHARS, max_size=20), max_size=4))
def test_an_object_of_strings_is_written_with_its_keys_in_utf16_order(
        doc: dict[str, str]) -> None:
    expected = "{" + ",".join(
        f"{json.dumps(k, ensure_ascii=False)}:{json.dumps(v, ensure_ascii=False)}"
        for k, v in sorted(doc.items(), key=lambda kv: kv[0].encode("utf-16-be"))) + "}"
    assert canonical_bytes(doc) == expected.encode("utf-8")
