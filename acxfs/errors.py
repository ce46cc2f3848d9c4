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


class KeyFormatError(InputError, ValueError):
    """Bytes or text that are not an Ed25519 key in the expected encoding."""


class EnvelopeFormatError(InputError):
    """The envelope is not DSSE JSON of the expected shape."""


class SkillError(InputError):
    """A SKILL.md that breaks the Agent Skills frontmatter rules, or a skill name that does."""


class PackError(InputError):
    """The inputs cannot become a valid cartridge."""


class IdentityError(InputError):
    """A bundle whose signed facts do not name it (unsigned, unverified, or not a safe name)."""


class Refused(AcxfsError):
    """Inside a format's check only: stop the check with this verdict (and further problems
    as warnings); the check turns it into its report, so it never reaches a caller."""

    def __init__(self, verdict: Verdict, more: tuple[str, ...] = ()) -> None:
        super().__init__(str(verdict))
        self.verdict = verdict
        self.more = more


class EnvironmentProblem(AcxfsError):
    """Something outside the container is wrong: a missing file, bad usage, no FUSE (exit 2)."""


class UnsafePathError(EnvironmentProblem):
    """A place acxfs was asked to write is not one it may write: a symbolic link on the way,
    or an entry acxfs did not make where it would replace or remove one."""


class AgentDirectoryError(EnvironmentProblem):
    """An agent's skill directory refused a step of a library change (read-only, full, no
    permission): the message names the directory and the system's reason."""

    def __init__(self, directory: str, reason: str) -> None:
        super().__init__(f"{directory}: {reason}")
        self.directory = directory
        self.reason = reason


class ForeignDirectory(UnsafePathError):
    """A directory acxfs would write in or trust that another user controls: it (or one
    above it) belongs to someone else, or others can write it without the sticky bit."""


class DamagedState(EnvironmentProblem):
    """One of acxfs's own files (the library's state, its intent record) that is not what
    acxfs writes: the wrong kind of file, too large, too deep, or a field of the wrong type or
    form.  Nothing is done with it; `acxfs repair` rebuilds the library without it."""

    def __init__(self, file: str, field: str, problem: str) -> None:
        super().__init__(f"{file} is damaged: {field}: {problem}; see docs/library.md "
                         "(recovering the library)")
        self.file = file
        self.field = field
        self.problem = problem


class DaemonDown(EnvironmentProblem):
    """No library daemon answers on its control socket."""


class TrustConfigError(EnvironmentProblem):
    """A trust registry, pin or key file is unusable."""


class UntrustedError(AcxfsError):
    """A verified container whose verdict is below the required trust (raised by mount)."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(str(verdict))
        self.verdict = verdict


class RefusedError(AcxfsError):
    """A change of the skills library acxfs will not make: a name taken, a bundle that is not
    verified, a rollback (exit 1, or the verdict's exit code for a bundle refused on trust)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class KeyChangeError(RefusedError):
    """A release of an installed identity signed for another publisher, or by another key,
    than the one the identity is bound to (exit 1)."""


class VersionError(InputError, ValueError):
    """Text that is not a SemVer 2.0.0 version."""


class LockError(EnvironmentProblem):
    """A project's acxfs.lock acxfs will not read: not the lock's schema, a field missing,
    unknown or malformed, merge conflict markers (exit 2)."""


class SourceError(RefusedError):
    """What a registry or repository said is unusable or not allowed: a bad index field, a
    withdrawn release, a changed coordinate, a download that is not what was named (exit 1)."""


class RollbackError(SourceError):
    """A source's index or ledger older than one acxfs accepted: a rollback or a stale
    mirror (exit 1)."""


class NetworkError(EnvironmentProblem):
    """A source could not be read: no answer, TLS refused, a redirect, a plain-HTTP address
    that is not loopback, or `--offline` (exit 2).  `retry_after`: the seconds the server
    asked acxfs to wait before asking again (`Retry-After`), when it said so."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PolicyRefusal(RefusedError):
    """Something the policy in effect (policy.json) does not allow (exit 1)."""


class StaleIndexError(PolicyRefusal):
    """An index generated longer ago than the policy's `maxIndexAgeDays` (exit 1)."""


class IsALink(OSError):
    """What is at a name opened without following links is a symbolic link
    (`acxfs.safe.inputs.open_file_at`); each caller says what that means for it."""


class NotAFile(OSError):
    """What is at a name is not a regular file: a directory, FIFO, socket or device
    (`acxfs.safe.inputs.open_file_at`)."""
