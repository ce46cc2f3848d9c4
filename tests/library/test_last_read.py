"""The daemon's last parse of one of the library's own files is reused for the very same
bytes only: other bytes are parsed again."""

from __future__ import annotations

from acxfs.library.serving.last_read import LastRead


def test_the_same_bytes_are_parsed_once_and_other_bytes_again() -> None:
    parsed: list[bytes] = []

    def parse(data: bytes) -> str:
        parsed.append(data)
        return data.decode().upper()

    last = LastRead(parse)
    assert [last.of(b"a"), last.of(b"a"), last.of(b"b"), last.of(b"a")] == ["A", "A", "B", "A"]
    assert parsed == [b"a", b"b", b"a"]
