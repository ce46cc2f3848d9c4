"""`acxfs service install` / `remove` through the real command: the unit passes
`systemd-analyze verify`, its `ExecStart` line run as written brings the library back (its
links serve verified bytes again) and its `ExecStop` line takes it down, and a unit acxfs did
not write is never replaced or removed.

Each test runs in conftest's isolated HOME and XDG directories, so the unit lands in
`$XDG_CONFIG_HOME/systemd/user/acxfs.service`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts.mounting import acxfs, acxfs_mounts_under, force_cleanup, run, wait_for

MARK = "# written by acxfs service install"
# The PATH a systemd user manager gives its services (systemd's default), not the test's.
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
START_TIMEOUT = 30.0


def home() -> Path:
    return Path(os.environ["HOME"])


def unit_file() -> Path:
    return Path(os.environ["XDG_CONFIG_HOME"]) / "systemd" / "user" / "acxfs.service"


def mnt() -> Path:
    return home() / ".local" / "share" / "acxfs" / "mnt"


# --- reading the unit the way systemd does -------------------------------------------------


def systemd_words(value: str, *, exec_line: bool) -> list[str]:
    """Split a unit value into words: whitespace-separated, "double-quoted" words with
    backslash escapes, `%%` for `%` (specifiers), and in `Exec*=` lines `$$` for `$`."""
    words: list[str] = []
    i = 0
    while i < len(value):
        if value[i].isspace():
            i += 1
            continue
        word = []
        quoted = value[i] == '"'
        i += quoted
        while i < len(value):
            c = value[i]
            if quoted and c == '"':
                i += 1
                break
            if not quoted and c.isspace():
                break
            if c == "\\" and i + 1 < len(value):
                word.append(value[i + 1])
                i += 2
                continue
            if c == "%":
                assert value[i + 1:i + 2] == "%", f"unescaped specifier in {value!r}"
                i += 1
            if exec_line and c == "$":
                assert value[i + 1:i + 2] == "$", f"unescaped variable in {value!r}"
                i += 1
            word.append(c)
            i += 1
        words.append("".join(word))
    return words


def unit_settings(path: Path) -> dict[tuple[str, str], list[str]]:
    """(section, key) -> every value given for it, in order."""
    found: dict[tuple[str, str], list[str]] = {}
    section = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        found.setdefault((section, key.strip()), []).append(value.strip())
    return found


def command(path: Path, key: str) -> list[str]:
    values = unit_settings(path)[("Service", key)]
    assert len(values) == 1, values
    return systemd_words(values[0], exec_line=True)


def environment(path: Path) -> dict[str, str]:
    env: dict[str, str] = {}
    for value in unit_settings(path).get(("Service", "Environment"), []):
        for word in systemd_words(value, exec_line=False):
            name, _, setting = word.partition("=")
            env[name] = setting
    return env


def service_env(path: Path) -> dict[str, str]:
    """What a systemd user manager gives the service: HOME, USER, its own PATH, and the
    unit's Environment= (none of the test's other variables)."""
    return {"HOME": str(home()), "USER": "root" if os.geteuid() == 0 else "user",
            "PATH": SYSTEMD_PATH, **environment(path)}


def systemd_analyze() -> str:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        if os.environ.get("CI") == "true":
            pytest.fail("systemd-analyze is missing (Debian's systemd package), and CI=true: "
                        "the unit must be verified in CI")
        pytest.skip("systemd-analyze is not installed")
    return tool


def verify(unit: Path) -> subprocess.CompletedProcess[str]:
    """`systemd-analyze verify` in system mode (it needs no running systemd)."""
    return run([systemd_analyze(), "verify", "--man=no", unit])


def install_ok() -> subprocess.CompletedProcess[str]:
    done = acxfs("service", "install")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done


# --- the unit ------------------------------------------------------------------------------


def test_installed_unit_passes_systemd_analyze_verify() -> None:
    install_ok()
    done = verify(unit_file())
    assert done.returncode == 0, done.stderr
    assert "acxfs.service" not in done.stderr, done.stderr  # no warning about the unit either


def test_systemd_analyze_verify_catches_a_broken_unit(tmp_path: Path) -> None:
    """The check above can fail: the same unit with an interpreter that does not exist."""
    install_ok()
    text = unit_file().read_text()
    python = command(unit_file(), "ExecStart")[0]
    broken = tmp_path / "acxfs.service"
    broken.write_text(text.replace(python, str(tmp_path / "no-such-python")))
    done = verify(broken)
    assert done.returncode != 0 and "no-such-python" in done.stderr, done


IN_VENV = sys.prefix != sys.base_prefix


def is_this_python(path: str | Path) -> bool:
    """Whether the unit names the interpreter running the tests (the console script's may be
    another name of it, `python3` for `python`): the same real file, named by its real path
    (a pyenv shim is no interpreter) or, in a virtual environment, by the environment's own
    `bin/` link, which is what makes Python use the environment's packages."""
    same = os.path.realpath(path) == os.path.realpath(sys.executable)
    if IN_VENV:
        return same and Path(path).parent == Path(sys.prefix) / "bin"
    return same and str(path) == os.path.realpath(path)


def test_unit_runs_the_real_interpreter_with_up_in_the_foreground(
        isolated_user_state: Path) -> None:
    done = install_ok()
    unit = unit_file()
    assert unit.read_text().splitlines()[0].startswith(MARK)
    start, stop = command(unit, "ExecStart"), command(unit, "ExecStop")
    python = Path(start[0])
    assert python.is_absolute() and python.is_file() and os.access(python, os.X_OK)
    assert is_this_python(python)  # not a shell shim
    assert python.is_symlink() == IN_VENV  # a venv's link is what selects the venv
    assert start[1:] == ["-m", "acxfs", "up", "-f"]
    assert stop == [str(python), "-m", "acxfs", "down"]
    settings = unit_settings(unit)
    assert settings[("Service", "Type")] == ["simple"]
    assert settings[("Service", "Restart")] == ["on-failure"]
    assert settings[("Install", "WantedBy")] == ["default.target"]
    env = environment(unit)
    assert env["ACXFS_TRUST_DIR"] == str(isolated_user_state)
    assert env["XDG_CONFIG_HOME"] == os.environ["XDG_CONFIG_HOME"]
    assert env["XDG_STATE_HOME"] == os.environ["XDG_STATE_HOME"]
    assert "XDG_DATA_HOME" not in env  # unset here: the default applies under systemd too
    assert f"wrote {unit}" in done.stdout
    if os.path.isdir("/run/systemd/system"):
        assert "systemctl --user daemon-reload && systemctl --user enable --now " \
               "acxfs.service" in done.stdout
    else:
        assert "cannot be enabled on this machine" in done.stdout
        assert f"~/.profile: {python} -m acxfs up" in done.stdout


def test_unit_goes_where_xdg_config_home_says_only_when_absolute(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/config")
    monkeypatch.setenv("XDG_DATA_HOME", "relative/data")
    install_ok()
    unit = home() / ".config" / "systemd" / "user" / "acxfs.service"
    assert unit.is_file()
    assert not (home() / "relative").exists()
    env = environment(unit)
    assert "XDG_CONFIG_HOME" not in env and "XDG_DATA_HOME" not in env


def make_venv(where: Path) -> Path:
    """A virtual environment at `where` that sees this acxfs; its python (a link)."""
    made = run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages",
                where], timeout=120)
    assert made.returncode == 0, made.stderr
    return where / "bin" / "python"


def test_odd_characters_are_quoted_for_systemd(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """An interpreter path with a space and `%` (a virtual environment, whose link is kept:
    resolving it would lose the environment) is read back by systemd-analyze itself; an
    environment value with a space, `%`, `$`, a quote and a backslash by the same rules."""
    venv_python = make_venv(tmp_path / "odd dir %h" / "venv")
    data = tmp_path / 'data "q" \\b $HOME %h'
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    done = run([venv_python, "-m", "acxfs", "service", "install"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    unit = unit_file()
    assert command(unit, "ExecStart") == [str(venv_python), "-m", "acxfs", "up", "-f"]
    assert environment(unit)["XDG_DATA_HOME"] == str(data)
    checked = verify(unit)
    assert checked.returncode == 0, checked.stderr
    assert "acxfs.service" not in checked.stderr, checked.stderr


def test_an_interpreter_path_systemd_cannot_run_is_refused(tmp_path: Path) -> None:
    venv_python = make_venv(tmp_path / "price $5" / "venv")
    done = run([venv_python, "-m", "acxfs", "service", "install"], cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == f"acxfs: error: {venv_python}: a systemd unit cannot run a program " \
        "whose path holds a quote, a backslash or '$'\n"
    assert not unit_file().exists()


def test_a_control_character_is_refused_and_nothing_written(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "line\nbreak"))
    done = acxfs("service", "install")
    assert done.returncode == 2
    assert done.stderr.startswith("acxfs: error: $XDG_DATA_HOME holds a control character")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert not unit_file().exists()


def test_install_again_is_unchanged_and_remove_takes_it_back() -> None:
    install_ok()
    first = unit_file().read_bytes()
    again = install_ok()
    assert "unchanged:" in again.stdout and unit_file().read_bytes() == first
    done = acxfs("service", "remove")
    assert done.returncode == 0, done.stderr
    assert f"removed {unit_file()}" in done.stdout
    assert not unit_file().exists()
    assert sorted(os.listdir(unit_file().parent)) == []
    done = acxfs("service", "remove")
    assert done.returncode == 0 and "nothing to remove" in done.stdout


def test_an_older_acxfs_unit_is_updated() -> None:
    unit = unit_file()
    unit.parent.mkdir(parents=True)
    unit.write_text(f"{MARK}\n[Service]\nExecStart=/old/python -m acxfs up -f\n")
    done = install_ok()
    assert f"updated {unit}" in done.stdout
    assert "/old/python" not in unit.read_text()
    assert is_this_python(command(unit, "ExecStart")[0])


USERS_UNIT = "[Unit]\nDescription=my own acxfs setup\n[Service]\nExecStart=/bin/true\n"


def test_a_unit_acxfs_did_not_write_is_never_replaced_or_removed() -> None:
    unit = unit_file()
    unit.parent.mkdir(parents=True)
    unit.write_text(USERS_UNIT)
    for action in ("install", "remove"):
        done = acxfs("service", action)
        assert done.returncode == 2, (action, done)
        assert done.stderr == f"acxfs: error: {unit} was not written by acxfs service " \
            "install; left as it is (move it away to install acxfs's unit)\n"
        assert unit.read_text() == USERS_UNIT
    assert sorted(os.listdir(unit.parent)) == ["acxfs.service"]


def test_a_link_at_the_unit_is_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.service"
    elsewhere.write_text(f"{MARK}\n[Service]\nExecStart=/bin/true\n")
    unit = unit_file()
    unit.parent.mkdir(parents=True)
    unit.symlink_to(elsewhere)
    for action in ("install", "remove"):
        done = acxfs("service", action)
        assert done.returncode == 2, (action, done)
        assert "is a symbolic link, not a unit acxfs wrote; left as it is" in done.stderr
        assert done.stderr.count("\n") == 1
        assert unit.is_symlink() and os.readlink(unit) == str(elsewhere)
        assert elsewhere.read_text() == f"{MARK}\n[Service]\nExecStart=/bin/true\n"


def test_an_enabled_unit_is_not_removed() -> None:
    install_ok()
    wants = unit_file().parent / "default.target.wants"
    wants.mkdir()
    (wants / "acxfs.service").symlink_to(unit_file())
    done = acxfs("service", "remove")
    assert done.returncode == 2
    assert "still enabled" in done.stderr and \
        "systemctl --user disable --now acxfs.service" in done.stderr
    assert unit_file().is_file()


# --- running the unit's command lines as written -------------------------------------------


@contextlib.contextmanager
def started_as_systemd_would(unit: Path, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The unit's ExecStart, as written, in the service's environment and working directory;
    on exit nothing it mounted is left behind (it fails the test otherwise)."""
    argv = command(unit, "ExecStart")
    log = (tmp_path / "service.log").open("wb")
    process = subprocess.Popen(argv, cwd=home(), env=service_env(unit),
                               stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.close()
        left = acxfs_mounts_under(tmp_path)
        for mountpoint in left:
            force_cleanup(mountpoint)
        assert not left, f"left mounted: {left}"


def wait_mounted(process: subprocess.Popen[bytes], tmp_path: Path) -> None:
    if not wait_for(lambda: os.path.ismount(mnt()) or process.poll() is not None,
                    START_TIMEOUT):
        pytest.fail(f"{mnt()} not mounted after {START_TIMEOUT}s")
    log = (tmp_path / "service.log").read_text(errors="replace")
    assert process.poll() is None, f"ExecStart exited {process.returncode}: {log}"
    assert os.path.ismount(mnt())


@pytest.mark.fuse
@pytest.mark.slow
def test_execstart_as_written_mounts_the_library_and_sigterm_unmounts_it(
        tmp_path: Path) -> None:
    install_ok()
    with started_as_systemd_would(unit_file(), tmp_path) as process:
        wait_mounted(process, tmp_path)
        process.send_signal(signal.SIGTERM)  # what systemd sends on stop after ExecStop
        assert process.wait(timeout=15) == 0
        assert not os.path.ismount(mnt())


def write_skill(root: Path, name: str) -> Path:
    skill = root / name
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(f"---\nname: {name}\ndescription: Survives a reboot.\n"
                                    f"---\n\n# {name}\n")
    return skill


@pytest.mark.fuse
@pytest.mark.slow
def test_after_a_reboot_execstart_serves_the_installed_skills_again(tmp_path: Path) -> None:
    """`acxfs add`, the daemon gone (as after a reboot): the unit's ExecStart brings the
    links back to verified bytes, and its ExecStop, as written, takes the library down."""
    assert acxfs("keygen").returncode == 0
    cart = tmp_path / "reboot.acx"
    packed = acxfs("pack", write_skill(tmp_path / "src", "reboot-skill"), "-o", cart,
                   "--publisher", "io.github.tester", "--version", "1.0.0")
    assert packed.returncode == 0, packed.stderr
    try:
        added = acxfs("add", cart)
        assert added.returncode == 0, added.stderr
        link = home() / ".claude" / "skills" / "reboot-skill" / "SKILL.md"
        assert "Survives a reboot." in link.read_text()
        assert acxfs("down").returncode == 0
        assert not os.path.ismount(mnt())
        with pytest.raises(OSError):
            link.read_text()  # fail closed while the daemon is down
        install_ok()
        unit = unit_file()
        with started_as_systemd_would(unit, tmp_path) as process:
            wait_mounted(process, tmp_path)
            assert "Survives a reboot." in link.read_text()
            stop = subprocess.run(command(unit, "ExecStop"), cwd=home(), env=service_env(unit),
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=30, check=False)
            assert stop.returncode == 0, stop.stderr
            assert process.wait(timeout=15) == 0
            assert not os.path.ismount(mnt())
    finally:
        acxfs("down")
        acxfs("remove", "reboot-skill")
