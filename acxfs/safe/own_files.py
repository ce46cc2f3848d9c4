"""acxfs's own JSON files (the library's state, its intent record, mount records), read as the
untrusted input they are: whoever or whatever changed them since acxfs wrote them is not
asked.

Invariant: `read_record` returns a record only from a regular file (opened `O_NONBLOCK |
O_NOFOLLOW` and checked with `fstat` on that descriptor: a FIFO never blocks a command, a link
is never followed), no larger than its bound, UTF-8, strict JSON (`strict_json`: one meaning
per key) nested no deeper than its bound (checked before parsing), whose every value passed
its field's kind in one `Table` per record kind (no field missing unless it has a default, no
field unknown).  Anything else is `DamagedState`, naming the file, the field and the problem.

A record kind is declared as a table of fields, each with its kind (`text`, `integer`,
`boolean`, `optional`, `list_of`, `map_of`, `pair_of`, or another table) and the dataclass
attribute it fills; adding a field is one line in its table.
"""

from __future__ import annotations

import copy
import errno
import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from acxfs.errors import DamagedState
from acxfs.safe import strict_json

T = TypeVar("T")
MAX_TEXT = 4096  # characters in one string field, unless its kind says otherwise
_NO_DEFAULT: Any = object()


class _Bad(Exception):
    """A value that is not of its field's kind: where it is, and what is wrong."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem


Kind = Callable[[object, str], Any]
"""Takes a parsed JSON value and where it is (a field path), returns the value as the record
holds it, or raises `_Bad`."""
Rule = Callable[[str], "str | None"]
"""A check of a string: None when it is acceptable, else what is wrong with it."""


def _a(value: object) -> str:
    """The JSON type of `value`, for a message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def _key(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _item(where: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    shown = json.dumps(key, ensure_ascii=True)
    return f"{where}[{shown if len(shown) <= 60 else shown[:56] + '...' + chr(34)}]"


def text(rule: Rule | None = None, *, max_len: int = MAX_TEXT) -> Kind:
    """A string of at most `max_len` characters that `rule` accepts."""

    def kind(value: object, where: str) -> str:
        if not isinstance(value, str):
            raise _Bad(where, f"not a string ({_a(value)})")
        if len(value) > max_len:
            raise _Bad(where, f"longer than {max_len} characters")
        problem = rule(value) if rule is not None else None
        if problem is not None:
            raise _Bad(where, problem)
        return value

    return kind


def integer(value: object, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise _Bad(where, f"not an integer ({_a(value)})")
    return value


def boolean(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise _Bad(where, f"not true or false ({_a(value)})")
    return value


def optional(inner: Kind) -> Kind:
    """null, or a value of `inner`."""

    def kind(value: object, where: str) -> Any:
        return None if value is None else inner(value, where)

    return kind


def list_of(inner: Kind) -> Kind:
    def kind(value: object, where: str) -> list[Any]:
        if not isinstance(value, list):
            raise _Bad(where, f"not a list ({_a(value)})")
        return [inner(item, _item(where, index)) for index, item in enumerate(value)]

    return kind


def pair_of(inner: Kind) -> Kind:
    """A list of exactly two values of `inner`, as a tuple."""

    def kind(value: object, where: str) -> tuple[Any, Any]:
        if not isinstance(value, list) or len(value) != 2:
            raise _Bad(where, f"not a list of two ({_a(value)})")
        return inner(value[0], _item(where, 0)), inner(value[1], _item(where, 1))

    return kind


def map_of(key: Rule, inner: Kind) -> Kind:
    """An object whose every key `key` accepts and every value is of `inner`."""

    def kind(value: object, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise _Bad(where, f"not an object ({_a(value)})")
        result = {}
        for name, item in value.items():
            problem = key(name)
            if problem is not None:
                raise _Bad(_item(where, name), f"key: {problem}")
            result[name] = inner(item, _item(where, name))
        return result

    return kind


@dataclass(frozen=True)
class Field:
    """One field of a table: its kind, the attribute it fills (None: read, then dropped; ''
    the field's own name) and its value when it is absent (none: it must be there)."""

    kind: Kind
    attr: str | None = ""
    default: Any = _NO_DEFAULT


@dataclass(frozen=True)
class Table(Generic[T]):
    """A record kind: a JSON object with exactly these fields, made into `make(**attrs)`.
    `check` sees the made record and names what is wrong across its fields, as (field,
    problem), or None.  A table is itself a kind (a record inside a record)."""

    make: Callable[..., T]
    fields: dict[str, Field]
    check: Callable[[T], tuple[str, str] | None] | None = field(default=None)

    def __call__(self, value: object, where: str) -> T:
        if not isinstance(value, dict):
            raise _Bad(where or "(the file)", f"not an object ({_a(value)})")
        unknown = sorted(set(value) - set(self.fields))
        if unknown:
            raise _Bad(_key(where, unknown[0][:60]), "not a field of this record")
        attrs: dict[str, Any] = {}
        for name, spec in self.fields.items():
            if name not in value:
                if spec.default is _NO_DEFAULT:
                    raise _Bad(_key(where, name), "missing")
                result = copy.copy(spec.default)  # a default {} or [] of its own
            else:
                result = spec.kind(value[name], _key(where, name))
            if spec.attr is not None:
                attrs[spec.attr or name] = result
        record = self.make(**attrs)
        if self.check is not None:
            problem = self.check(record)
            if problem is not None:
                raise _Bad(_key(where, problem[0]), problem[1])
        return record


# --- reading ------------------------------------------------------------------------------


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"


def read_file(path: Path, max_bytes: int) -> bytes | None:
    """The bytes of the regular file `path` (None when nothing is there); `DamagedState`
    for anything else there (a link, a FIFO, a directory, a socket, a device) or a file over
    `max_bytes`.  Never blocks, never follows a link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise DamagedState(str(path), "(the file)", "a symbolic link, not a regular "
                               "file") from exc
        if exc.errno == errno.ENXIO:
            raise DamagedState(str(path), "(the file)", "a socket, not a regular file") from exc
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise DamagedState(str(path), "(the file)",
                               f"{_kind_of(info.st_mode)}, not a regular file")
        if info.st_size > max_bytes:
            raise DamagedState(str(path), "(the file)", f"larger than {max_bytes} bytes")
        chunks = []
        size = 0
        while chunk := os.read(fd, 1024 * 1024):
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:  # it grew since fstat
                raise DamagedState(str(path), "(the file)", f"larger than {max_bytes} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def parse(text: str | bytes, table: Table[T], *, source: str, max_depth: int,
          prefix: str = "") -> T:
    """The record `text` holds, by `table`; `DamagedState` naming `source` and the field
    (below `prefix`, for a record held as a string inside another) otherwise."""
    try:
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _Bad(prefix or "(the file)", "not UTF-8") from exc
        try:
            doc = strict_json.loads(text, max_depth=max_depth)
        except (ValueError, RecursionError) as exc:
            reason = "nested too deep" if isinstance(exc, RecursionError) else str(exc)
            raise _Bad(prefix or "(the file)", f"not JSON acxfs wrote ({reason})") from exc
        return table(doc, prefix)
    except _Bad as exc:
        raise DamagedState(source, exc.where, exc.problem) from exc


def read_record(path: Path, table: Table[T], *, max_bytes: int, max_depth: int) -> T | None:
    """The record in the file `path` (None when there is none), read and checked as the
    module docstring says."""
    data = read_file(path, max_bytes)
    if data is None:
        return None
    return parse(data, table, source=str(path), max_depth=max_depth)
