"""The one exception hierarchy of acxfs.

Errors about untrusted input (a container that is malformed, tampered with or not trusted
enough) are kept apart from errors about the environment (missing files, FUSE absent, bad
usage).  Every error carries a message fit to print on one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from acxfs.verdict import Verdict


class AcxfsError(Exception):
    """Root of every error acxfs raises on purpose."""


class InputError(AcxfsError):
    """The container's bytes are not acceptable."""


class MalformedError(InputError):
    """The container breaks a structural rule (invalid / malformed, exit 6)."""


class IncompatibleError(MalformedError):
    """The container declares a version or requirement acxfs does not implement (exit 6)."""


class TamperError(InputError):
    """Bytes differ from what was signed (invalid / tampered, exit 5)."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class UnverifiableError(InputError):
    """A file with no digest to check its bytes against (an unsigned SAVE file): never served,
    and not a tamper event either."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class LimitError(MalformedError):
    """The container exceeds one of the bounds in `acxfs.limits`."""


class EnvironmentProblem(AcxfsError):
    """Something outside the container is wrong: a missing file, bad usage, no FUSE (exit 2)."""


class TrustConfigError(EnvironmentProblem):
    """A trust registry, pin or key file is unusable."""


class UntrustedError(AcxfsError):
    """A verified container whose verdict is below the required trust (raised by mount)."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(str(verdict))
        self.verdict = verdict
