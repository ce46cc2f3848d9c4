"""Which FUSE binding serves a mount: acxfs's own binding of libfuse3's low-level API
(`acxfs.mount.lowlevel`) where libfuse3 loads, else fusepy over libfuse2 (`DEFAULT_BACKEND`,
the binding that is always there); mfusepy's high-level libfuse3 API when named.

All call the same `acxfs.mount.operations.AcxOperations`; only the library and its options
differ.  libfuse3 is optional (`pip install 'acxfs[fuse3]'` and Debian's `libfuse3-3`): over
it directory listings carry each entry's attributes (READDIRPLUS), which halves cold `find` and
`ls -lR` (docs/performance.md); through the low-level API the kernel also keeps directory
listings and pages and sends no open or release (what `preferred` picks for `acxfs mount`
and the library's daemon).  `load` either returns a working `FUSE` class or raises
EnvironmentProblem naming what to install.
"""

from __future__ import annotations

import ctypes.util
import functools
import os
import shutil
from typing import Any

from acxfs.errors import EnvironmentProblem
from acxfs.mount.lowlevel import LowLevelFUSE, required_calls

LOWLEVEL = "libfuse3-lowlevel"
BACKENDS = ("libfuse2", "libfuse3", LOWLEVEL)
DEFAULT_BACKEND = "libfuse2"


@functools.cache
def load(backend: str) -> Any:
    """The `FUSE` class of `backend`, with its library loaded (once per process: the mount's
    pre-flight check and the serving process then use the same class)."""
    if backend == "libfuse3":
        return _with_readdirplus(_load_libfuse3())
    if backend == LOWLEVEL:
        return _lowlevel(_load_libfuse3())
    try:
        from fuse import FUSE
    except (OSError, ImportError) as exc:
        raise EnvironmentProblem(f"libfuse is not installed ({exc}); install fuse and "
                                 "libfuse2") from exc
    return FUSE


def _load_libfuse3() -> Any:
    library = ctypes.util.find_library("fuse3")
    if library is None:
        raise EnvironmentProblem("--backend libfuse3 needs libfuse3 (apt-get install libfuse3-3)")
    if os.geteuid() != 0 and shutil.which("fusermount3") is None:
        raise EnvironmentProblem("--backend libfuse3 as a normal user needs fusermount3 "
                                 "(Debian's fuse3 package)")
    # mfusepy picks its library when first imported; fusepy reads the same variable, so it is
    # put back at once (a process that tried libfuse3 can still load libfuse2).
    before = os.environ.get("FUSE_LIBRARY_PATH")
    os.environ["FUSE_LIBRARY_PATH"] = library
    try:
        import mfusepy
    except ImportError as exc:
        raise EnvironmentProblem(
            f"--backend libfuse3 needs mfusepy ({exc}); pip install 'acxfs[fuse3]'") from exc
    except OSError as exc:
        raise EnvironmentProblem(f"libfuse3 cannot be loaded ({exc})") from exc
    finally:
        if before is None:
            del os.environ["FUSE_LIBRARY_PATH"]
        else:
            os.environ["FUSE_LIBRARY_PATH"] = before
    if mfusepy.fuse_version_major != 3:
        raise EnvironmentProblem(
            "--backend libfuse3: mfusepy was already loaded with another libfuse in this process")
    return mfusepy


def _lowlevel(mfusepy: Any) -> Any:
    missing = [name for name in required_calls() if not hasattr(mfusepy._libfuse, name)]
    if missing:
        raise EnvironmentProblem(f"--backend {LOWLEVEL}: libfuse3 lacks {', '.join(missing)}")
    return functools.partial(LowLevelFUSE, mfusepy=mfusepy)


READDIR_PLUS = 1  # fuse_readdir_flags: the kernel asked for READDIRPLUS
FILL_DIR_PLUS = 2  # fuse_fill_dir_flags: this entry carries its attributes


def _with_readdirplus(mfusepy: Any) -> Any:
    """mfusepy's FUSE, answering a directory's first READDIRPLUS with each entry's attributes
    (mfusepy passes only names and types, so the kernel would still send a LOOKUP for every
    file it then opens).  Once a directory was listed to its end with attributes, the kernel
    holds them for the entry timeout, so later listings carry names and types only: filling
    a full stat per entry again would make every warm `find` or `ls` pay for it."""

    class FUSE(mfusepy.FUSE):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._listed: set[bytes] = set()  # directories listed to the end with attributes
            super().__init__(*args, **kwargs)

        def readdir_fuse_3(self, path: bytes | None, buf: Any, filler: Any, offset: int,
                           fip: Any, flags: int) -> int:
            listing = getattr(self.operations, "readdir_plus", None)
            if path is None or listing is None or not flags & READDIR_PLUS:
                return int(super().readdir_fuse_3(path, buf, filler, offset, fip, flags))
            # libfuse's high-level API passes attributes on only for entries with an offset;
            # entry i has offset i + 1, where the next call resumes when the buffer is full.
            entries = listing(path.decode(self.encoding, self.errors))
            with_attrs = path not in self._listed
            kind = mfusepy.c_stat()  # names only: the type bits, as mfusepy itself sends
            for index in range(offset, len(entries)):
                name, attrs, mode = entries[index]
                if with_attrs and attrs is not None:
                    given = mfusepy.c_stat()
                    mfusepy.set_st_attrs(given, attrs, use_ns=self.use_ns)
                    plus = FILL_DIR_PLUS
                else:  # the name and its type only (a file that failed its check is a file)
                    given, plus = kind, 0
                    kind.st_mode = mode
                if filler(buf, name.encode(self.encoding, self.errors), given, index + 1,
                          plus) != 0:
                    return 0
            if with_attrs:
                self._listed.add(path)
            return 0

    return FUSE


def preferred() -> str:
    """The backend `acxfs mount` and the library's daemon serve with unless told: libfuse3's
    low-level API where it loads (the kernel then keeps entries, attributes, listings and
    file pages), else libfuse2.  ACXFS_FUSE_BACKEND names one instead."""
    named = os.environ.get("ACXFS_FUSE_BACKEND", "")
    if named in BACKENDS:
        return named
    try:
        load(LOWLEVEL)
    except EnvironmentProblem:
        return DEFAULT_BACKEND
    return LOWLEVEL


def options(backend: str) -> dict[str, Any]:
    """Mount options beyond the common ones, per library."""
    if backend in ("libfuse3", LOWLEVEL):
        return {"max_threads": 16}
    return {"max_read": 131072}
