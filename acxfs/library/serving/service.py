"""The library daemon as a systemd user service: the unit `acxfs service install` writes and
`acxfs service remove` takes back.

Invariant: the unit's `ExecStart` and `ExecStop` run an absolute interpreter that exists,
checked to import this very acxfs outside the working directory, with `-m acxfs up -f` /
`-m acxfs down` (no shell, no PATH lookup), in the environment the library is found with now
(the absolute XDG directories and `ACXFS_TRUST_DIR` that are set); every value is quoted for
systemd's parser or refused.  The unit file is written and removed only through `safe_fs`
(no link followed on the way, every directory on it one another user cannot change: whoever
could replace the unit would run code as this user), and acxfs replaces or removes
`acxfs.service` only when its first line is acxfs's own mark: a unit acxfs did not write is
left as it is.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import acxfs
from acxfs.errors import EnvironmentProblem, IsALink, NotAFile, UnsafePathError
from acxfs.paths import home, xdg_dir
from acxfs.safe import dirs as safe_dirs
from acxfs.safe import files as safe_files
from acxfs.safe import ownership
from acxfs.safe.inputs import open_file_at

UNIT_NAME = "acxfs.service"
MARK = "# written by acxfs service install; acxfs service remove deletes it"
_MARK_PREFIX = "# written by acxfs service install"
# The variables whose value decides where the library, its trust store and its log are.
XDG_VARIABLES = ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME")
TRUST_VARIABLE = "ACXFS_TRUST_DIR"
SYSTEMD_RUNNING_MARKER = "/run/systemd/system"  # what sd_booted(3) checks
ENABLE_COMMAND = "systemctl --user daemon-reload && systemctl --user enable --now acxfs.service"
DISABLE_COMMAND = "systemctl --user disable --now acxfs.service"
_MAX_UNIT = 64 * 1024  # bytes read of an existing unit file
_PLAIN_WORD = re.compile(r"[A-Za-z0-9_./:@+,=-]+")


@dataclass(frozen=True)
class Installed:
    """What `install` did: the unit's path, the command lines in it, and whether the file
    was `written` (new), `replaced` (acxfs's older unit) or `unchanged`."""

    path: Path
    exec_start: list[str]
    outcome: str


def unit_dir() -> Path:
    """`$XDG_CONFIG_HOME/systemd/user` (when absolute), else `~/.config/systemd/user`: where
    the systemd user manager looks for a user's own units."""
    return xdg_dir("XDG_CONFIG_HOME", ".config") / "systemd" / "user"


def unit_path() -> Path:
    return unit_dir() / UNIT_NAME


def systemd_running() -> bool:
    """Whether this machine was booted with systemd (sd_booted's test)."""
    return os.path.isdir(SYSTEMD_RUNNING_MARKER)


def interpreter() -> str:
    """The absolute path of the running interpreter, an executable file that exists.

    Symbolic links are resolved to the real file, except inside a virtual environment: there
    the link is what makes the interpreter use the environment's packages, so it is kept."""
    executable = sys.executable
    if not executable or not os.path.isabs(executable):
        raise EnvironmentProblem("cannot tell which Python runs acxfs (sys.executable is "
                                 f"{executable!r}); the service needs its absolute path")
    in_venv = sys.prefix != sys.base_prefix
    path = os.path.abspath(executable) if in_venv else os.path.realpath(executable)
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise EnvironmentProblem(f"{path}: the Python running acxfs is not an executable "
                                 "file there; the service could not start it")
    return path


def unit_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables the daemon needs to find the library this user has now: each XDG
    directory set to an absolute path, and `ACXFS_TRUST_DIR` (made absolute) when set."""
    env = os.environ if environ is None else environ
    chosen = {name: env[name] for name in XDG_VARIABLES if os.path.isabs(env.get(name, ""))}
    if env.get(TRUST_VARIABLE):
        chosen[TRUST_VARIABLE] = os.path.abspath(env[TRUST_VARIABLE])
    return chosen


def _check_value(value: str, what: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise EnvironmentProblem(f"{what} is not valid UTF-8; a systemd unit cannot name "
                                 "it") from None
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise EnvironmentProblem(f"{what} holds a control character; a systemd unit cannot "
                                 "name it")


def _quoted(value: str) -> str:
    """`value` as one word of a unit file: double-quoted (with `\\` and `"` escaped) unless it
    is plain; `%` doubled, for systemd's specifier expansion."""
    word = value if _PLAIN_WORD.fullmatch(value) else \
        '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return word.replace("%", "%%")


def _command_line(argv: list[str]) -> str:
    """An `Exec*=` value: each word quoted; `$` doubled in the arguments (systemd expands
    `$VAR` there); an executable path systemd refuses (quotes, `\\`) or would read
    differently from its argv[0] (`$`) is refused here."""
    executable, *arguments = argv
    _check_value(executable, executable)
    if any(c in executable for c in "\"'\\$"):
        raise EnvironmentProblem(f"{executable}: a systemd unit cannot run a program whose path "
                                 "holds a quote, a backslash or '$'")
    for word in arguments:
        _check_value(word, repr(word))
    return " ".join([_quoted(executable), *(_quoted(w).replace("$", "$$") for w in arguments)])


def render_unit(python: str, environment: Mapping[str, str]) -> str:
    """The text of the unit that serves the library with `python`."""
    start = [python, "-m", "acxfs", "up", "-f"]
    stop = [python, "-m", "acxfs", "down"]
    lines = [
        MARK,
        "[Unit]",
        "Description=acxfs skills library (signed skill bundles, verified on every read)",
        "",
        "[Service]",
        "Type=simple",
        f"ExecStart={_command_line(start)}",
        f"ExecStop={_command_line(stop)}",
        "Restart=on-failure",
        "RestartSec=2",
    ]
    for name, value in environment.items():
        _check_value(value, f"${name}")
        lines.append(f"Environment={_quoted(f'{name}={value}')}")
    lines += ["", "[Install]", "WantedBy=default.target", ""]
    return "\n".join(lines)


def _check_imports_this_acxfs(python: str, environment: Mapping[str, str]) -> None:
    """Refuse when `python -m acxfs` would not find this acxfs outside the working directory
    (run from the source tree, or only through PYTHONPATH): the unit would not start."""
    here = os.path.realpath(os.path.dirname(acxfs.__file__))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home()),
           **environment}
    try:
        done = subprocess.run(
            [python, "-c", "import os, acxfs; print(os.path.dirname(acxfs.__file__))"],
            cwd="/", env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentProblem(f"{python} could not be run to check the service "
                                 f"({exc})") from exc
    found = done.stdout.strip()
    if done.returncode != 0 or os.path.realpath(found or "/nonexistent") != here:
        where = f"finds another one in {found}" if done.returncode == 0 else "does not find it"
        raise EnvironmentProblem(f"{python} -m acxfs, run outside this directory, {where} "
                                 f"(this acxfs is {here}): install it for that Python "
                                 "(pip install .) before installing the service")


def _read_ours(dirfd: int, path: Path) -> tuple[str, tuple[int, int]] | None:
    """The text and (device, inode) of the unit at `path` if acxfs wrote it; None if nothing
    is there; `UnsafePathError` for anything else (a link, not a file, another's unit)."""
    try:
        opened = open_file_at(dirfd, path.name)
    except IsALink:
        raise UnsafePathError(f"{path} is a symbolic link, not a unit acxfs wrote; "
                              "left as it is") from None
    except NotAFile:
        raise UnsafePathError(f"{path} is not a file acxfs wrote; left as it is") from None
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    if opened is None:
        return None
    fd, info = opened
    try:
        data = os.read(fd, _MAX_UNIT)
    finally:
        os.close(fd)
    text = data.decode("utf-8", errors="replace")
    if not text.startswith(_MARK_PREFIX):
        raise UnsafePathError(f"{path} was not written by acxfs service install; left as it "
                              "is (move it away to install acxfs's unit)")
    return text, (info.st_dev, info.st_ino)


def install() -> Installed:
    """Write (or refresh) acxfs's user unit; refuse to touch a unit acxfs did not write."""
    python = interpreter()
    environment = unit_environment()
    text = render_unit(python, environment)
    _check_imports_this_acxfs(python, environment)
    path = unit_path()
    mode = 0o644 & ~safe_dirs.current_umask()
    with ownership.make_dirs(unit_dir(), 0o755, allow_user_symlink=True) as made:
        found = _read_ours(made.fd, path)
        old = None if found is None else found[0]
        if old == text:
            outcome = "unchanged"
        elif old is None:
            try:
                safe_files.write_new_at(made.fd, path.name, text.encode(), mode)
            except FileExistsError:
                raise UnsafePathError(f"{path} was made by another process meanwhile; left "
                                      "as it is") from None
            outcome = "written"
        else:
            safe_files.replace_file_at(made.fd, path.name, text.encode(), mode)
            outcome = "replaced"
    return Installed(path, [python, "-m", "acxfs", "up", "-f"], outcome)


def enabled_links(directory: Path | None = None) -> list[Path]:
    """Entries named `acxfs.service` in the `*.wants`/`*.requires` directories beside the
    unit: what `systemctl --user enable` made."""
    base = unit_dir() if directory is None else directory
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return []
    return [base / name / UNIT_NAME for name in names
            if name.endswith((".wants", ".requires")) and os.path.lexists(base / name / UNIT_NAME)]


def remove() -> Path | None:
    """Delete acxfs's unit (None when there is none); refuse one acxfs did not write, and
    one still enabled (its links would dangle)."""
    path = unit_path()
    try:
        dirfd = ownership.open_dir(unit_dir(), allow_user_symlink=True)
    except FileNotFoundError:
        return None
    try:
        found = _read_ours(dirfd, path)
        if found is None:
            return None
        enabled = enabled_links()
        if enabled:
            raise EnvironmentProblem(f"{path} is still enabled ({enabled[0]}); first run: "
                                     f"{DISABLE_COMMAND}")
        now = os.stat(path.name, dir_fd=dirfd, follow_symlinks=False)
        if (now.st_dev, now.st_ino) != found[1]:  # the file checked is the one removed
            raise UnsafePathError(f"{path} was replaced meanwhile; left as it is")
        os.unlink(path.name, dir_fd=dirfd)
        safe_dirs.fsync_dir(dirfd)
    finally:
        os.close(dirfd)
    return path


def profile_line(python: str) -> str:
    """The shell-profile line that starts the library at login, as the unit would."""
    return f"{shlex.quote(python)} -m acxfs up"
