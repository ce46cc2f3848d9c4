"""Which FUSE binding serves a mount: fusepy over libfuse2 (the default) or mfusepy over libfuse3.

Both call the same `acxfs.fs.AcxOperations`; only the library and its options differ.  libfuse3
is optional (`pip install 'acxfs[fuse3]'` and Debian's `libfuse3-3`): over it the kernel serves
a cached file about as fast as a local one (docs/performance.md).  `load` either returns a
working `FUSE` class or raises EnvironmentProblem naming what to install.
"""

from __future__ import annotations

import ctypes.util
import os
import shutil
from typing import Any

from acxfs.errors import EnvironmentProblem

BACKENDS = ("libfuse2", "libfuse3")
DEFAULT_BACKEND = "libfuse2"


def load(backend: str) -> Any:
    """The `FUSE` class of `backend`, with its library loaded."""
    if backend == "libfuse3":
        return _load_libfuse3()
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
    os.environ["FUSE_LIBRARY_PATH"] = library  # mfusepy picks its library when first imported
    try:
        import mfusepy
    except ImportError as exc:
        raise EnvironmentProblem(
            f"--backend libfuse3 needs mfusepy ({exc}); pip install 'acxfs[fuse3]'") from exc
    except OSError as exc:
        raise EnvironmentProblem(f"libfuse3 cannot be loaded ({exc})") from exc
    if mfusepy.fuse_version_major != 3:
        raise EnvironmentProblem(
            "--backend libfuse3: mfusepy was already loaded with another libfuse in this process")
    if os.geteuid() != 0 and shutil.which("fusermount3") is None:
        raise EnvironmentProblem("--backend libfuse3 as a normal user needs fusermount3 "
                                 "(Debian's fuse3 package)")
    return _with_readdirplus(mfusepy)


READDIR_PLUS = 1  # fuse_readdir_flags: the kernel asked for READDIRPLUS
FILL_DIR_PLUS = 2  # fuse_fill_dir_flags: this entry carries its attributes


def _with_readdirplus(mfusepy: Any) -> Any:
    """mfusepy's FUSE, answering READDIRPLUS with each entry's attributes (mfusepy passes only
    names and types, so the kernel would still send a LOOKUP for every file it then opens)."""

    class FUSE(mfusepy.FUSE):  # type: ignore[misc]
        def readdir_fuse_3(self, path: bytes | None, buf: Any, filler: Any, offset: int,
                           fip: Any, flags: int) -> int:
            listing = getattr(self.operations, "readdir_plus", None)
            if path is None or listing is None or not flags & READDIR_PLUS:
                return int(super().readdir_fuse_3(path, buf, filler, offset, fip, flags))
            # libfuse's high-level API passes attributes on only for entries with an offset;
            # entry i has offset i + 1, where the next call resumes when the buffer is full.
            entries = listing(path.decode(self.encoding, self.errors))
            for index in range(offset, len(entries)):
                name, attrs = entries[index]
                stat = None
                if attrs is not None:
                    stat = mfusepy.c_stat()
                    mfusepy.set_st_attrs(stat, attrs, use_ns=self.use_ns)
                plus = FILL_DIR_PLUS if stat is not None else 0
                if filler(buf, name.encode(self.encoding, self.errors), stat, index + 1,
                          plus) != 0:
                    break
            return 0

    return FUSE


def options(backend: str) -> dict[str, Any]:
    """Mount options beyond the common ones, per library."""
    if backend == "libfuse3":
        return {"max_threads": 16}
    return {"max_read": 131072}
