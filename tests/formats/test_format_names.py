"""The format names the library reads without loading the formats (a store file's suffix, a
lock's `format`) are the format table's own, in its order."""

from __future__ import annotations

from acxfs.container import FORMAT_NAMES
from acxfs.formats import FORMATS


def test_the_names_read_without_the_formats_are_the_tables() -> None:
    assert tuple(f.name for f in FORMATS) == FORMAT_NAMES
