"""The writer: pack output verifies, extracts with stock sqlite3 and is reproducible."""

from __future__ import annotations

import base64
import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from scripts import cartwriter as cw
from scripts.mounting import acxfs_command
from tests.support import REPO

EXAMPLE = REPO / "examples" / "hello-acx"
PUB = "io.github.acxfs-tests"


def _skill(root: Path, name: str, body: str = "", extra: dict[str, bytes] | None = None) -> Path:
    skill = root / name
    (skill / "references").mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: The {name} skill for tests.\n---\n\n# {name}\n{body}\n")
    (skill / "references" / "notes.md").write_text(f"notes of {name}\n")
    for rel, data in (extra or {}).items():
        (skill / rel).parent.mkdir(parents=True, exist_ok=True)
        (skill / rel).write_bytes(data)
    return skill


@pytest.mark.parametrize("deflate", ["zlib", "raw", "none"])
def test_pack_output_verifies_as_local_with_the_default_key(run_cli, tmp_path, deflate) -> None:
    assert run_cli("keygen").code == 0
    out = tmp_path / "hello.acx"
    assert run_cli("pack", EXAMPLE, "-o", out, "--publisher", PUB, "--deflate", deflate).code == 0
    result = run_cli("verify", out, "--deep")
    assert (result.code, result.verdict) == (0, "verified / local - Signed by this instance.")
    assert "warning" not in result.out


def test_pack_binds_every_cartridge_key_but_the_manifest_hash(run_cli, tmp_path) -> None:
    # Spec section 2: a writer binds every key it writes, except acx.rom_manifest_hash.
    assert run_cli("keygen").code == 0
    out = tmp_path / "hello.acx"
    assert run_cli("pack", EXAMPLE, "-o", out, "--publisher", PUB).code == 0
    with sqlite3.connect(out) as conn:
        keys = {k for (k,) in conn.execute("SELECT key FROM cartridge")}
        bound = {ref.removeprefix("cartridge:") for (ref,) in conn.execute(
            "SELECT source_ref FROM objects WHERE kind = 'cartridge' AND zone = 'rom'")}
    assert "acx.vec0_format" in keys
    assert keys - bound == {"acx.rom_manifest_hash"}


@pytest.mark.parametrize("deflate", ["zlib", "raw"])
def test_pack_output_is_trusted_with_a_registry_naming_its_key(
        run_cli, tmp_path, make_registry, deflate) -> None:
    key = tmp_path / "ci-key.pem"
    assert run_cli("keygen", key).code == 0
    pem = (tmp_path / "ci-key.pub.pem").read_text()
    registry = make_registry([cw.registry_entry(pem, PUB)])
    out = tmp_path / "hello.acx"
    assert run_cli("pack", EXAMPLE, "-o", out, "--publisher", PUB, "--key", key,
                   "--deflate", deflate).code == 0
    assert run_cli("verify", out).code == 4
    result = run_cli("verify", out, "--deep", "--registry", registry)
    expected = f"verified / trusted - Signed by trusted publisher {PUB}."
    assert (result.code, result.verdict) == (0, expected)


@pytest.mark.parametrize("deflate", ["zlib", "none"])
def test_stock_sqlite3_extracts_pack_output_byte_identically(run_cli, tmp_path, deflate) -> None:
    run_cli("keygen")
    out = tmp_path / "hello.acx"
    assert run_cli("pack", EXAMPLE, "-o", out, "--publisher", PUB, "--deflate", deflate,
                   "--sqlar-dirs").code == 0
    dest = tmp_path / "x"
    dest.mkdir()
    subprocess.run(["sqlite3", str(out), "-Ax"], cwd=dest, check=True, capture_output=True)
    diff = subprocess.run(["diff", "-r", str(EXAMPLE), str(dest / "rom/skills/hello-acx")],
                          capture_output=True, text=True)
    assert diff.returncode == 0, diff.stdout


def test_independent_reader_accepts_pack_output(run_cli, tmp_path) -> None:
    """The test-only writer's reader (written from the spec) recomputes the signed manifest."""
    run_cli("keygen")
    out = tmp_path / "hello.acx"
    run_cli("pack", EXAMPLE, "-o", out, "--publisher", PUB, "--deflate", "raw")
    conn = sqlite3.connect(out)
    rows = cw.rom_rows(conn)
    (env, pem, recorded), = conn.execute(
        "SELECT envelope, public_key_pem, manifest_hash FROM signatures").fetchall()
    statement = json.loads(cw.open_envelope(env, pem))
    for row in rows:
        if row.kind == "sqlar":
            blob, sz = conn.execute("SELECT data, sz FROM sqlar WHERE name=?",
                                    (row.source_ref,)).fetchone()
            assert cw.oid_of(cw.inflate(blob, sz)) == row.oid
        else:
            assert cw.live_oid(conn, row) == row.oid
    subject = "sha256:" + statement["subject"][0]["digest"]["sha256"]
    assert cw.manifest_hash(rows) == recorded == subject
    assert statement["predicate"]["fileCount"] == len(rows)


def test_pack_is_reproducible_with_source_date_epoch(run_cli, tmp_path, monkeypatch) -> None:
    run_cli("keygen")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    payloads = []
    for name in ("a.acx", "b.acx"):
        run_cli("pack", EXAMPLE, "-o", tmp_path / name, "--publisher", PUB,
                "--uuid", "00000000-0000-4000-8000-000000000001")
        env = sqlite3.connect(tmp_path / name).execute("SELECT envelope FROM signatures").fetchone()
        payloads.append(base64.b64decode(json.loads(env[0])["payload"]))
    assert payloads[0] == payloads[1]
    assert b'"signedAt":"2026-01-01T00:00:00.000Z"' in payloads[0]


@pytest.mark.parametrize(
    ("frontmatter", "complaint"),
    [
        ("name: other-name\ndescription: d", "differs from its directory"),
        ("name: bad-skill\ndescription: d\nsurprise: 1", "unknown key"),
        ("name: bad-skill", "description"),
        ("name: Bad_Skill\ndescription: d", "must be 1-64"),
    ],
)
def test_pack_refuses_invalid_skills(run_cli, tmp_path, frontmatter, complaint) -> None:
    run_cli("keygen")
    skill = tmp_path / ("Bad_Skill" if "Bad_" in frontmatter else "bad-skill")
    skill.mkdir()
    (skill / "SKILL.md").write_text(f"---\n{frontmatter}\n---\nbody\n")
    result = run_cli("pack", skill, "-o", tmp_path / "x.acx", "--publisher", PUB)
    assert result.code == 1 and complaint in result.err and "Traceback" not in result.err
    assert not (tmp_path / "x.acx").exists()


@pytest.mark.parametrize("name", ["has space.md", ".hidden", "semi;colon.md"])
def test_pack_refuses_non_portable_names(run_cli, tmp_path, name) -> None:
    run_cli("keygen")
    skill = _skill(tmp_path, "good-skill", extra={f"references/{name}": b"x"})
    result = run_cli("pack", skill, "-o", tmp_path / "x.acx", "--publisher", PUB)
    assert result.code == 1 and "not portable" in result.err


def test_pack_refuses_identical_files(run_cli, tmp_path) -> None:
    run_cli("keygen")
    skill = _skill(tmp_path, "twin-skill", extra={"assets/a.txt": b"same", "assets/b.txt": b"same"})
    result = run_cli("pack", skill, "-o", tmp_path / "x.acx", "--publisher", PUB)
    assert result.code == 1 and "identical bytes" in result.err
    assert "assets/a.txt" in result.err and "assets/b.txt" in result.err


def test_pack_without_a_key_says_how_to_make_one(run_cli, tmp_path) -> None:
    result = run_cli("pack", EXAMPLE, "-o", tmp_path / "x.acx", "--publisher", PUB)
    assert result.code == 2 and "acxfs keygen" in result.err


def test_pack_never_replaces_its_signing_key_or_a_file_it_packs(run_cli, tmp_path) -> None:
    key = tmp_path / "k.pem"
    assert run_cli("keygen", key).code == 0
    skill = _skill(tmp_path, "keep-skill", extra={"references/notes.md": b"mine\n"})
    key_text = key.read_text()
    for output, complaint in ((key, "is not a cartridge"),
                              (skill / "references" / "notes.md", "inside the skill directory"),
                              (skill / "new.acx", "inside the skill directory")):
        result = run_cli("pack", skill, "-o", output, "--publisher", PUB, "--key", key)
        assert result.code in (1, 2) and complaint in result.err, result.err
        assert result.err.count("\n") == 1
    database = tmp_path / "important.db"  # SQLite, but not a cartridge
    with sqlite3.connect(database) as conn:
        conn.execute("CREATE TABLE notes (t)")
    result = run_cli("pack", skill, "-o", database, "--publisher", PUB, "--key", key)
    assert result.code == 2 and "is not a cartridge" in result.err
    with sqlite3.connect(database) as conn:
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("notes",)]
    assert key.read_text() == key_text
    assert (skill / "references" / "notes.md").read_bytes() == b"mine\n"
    assert not (skill / "new.acx").exists()
    out = tmp_path / "x.acx"  # a cartridge is replaced by a new one, as before
    assert run_cli("pack", skill, "-o", out, "--publisher", PUB, "--key", key).code == 0
    assert run_cli("pack", skill, "-o", out, "--publisher", PUB, "--key", key).code == 0
    loop = tmp_path / "loop.acx"
    loop.symlink_to(loop)  # resolving it never ends (Path.resolve raised RuntimeError)
    result = run_cli("pack", skill, "-o", loop, "--publisher", PUB, "--key", key)
    assert result.code == 0 and not loop.is_symlink()  # the dangling link gave way, as any does
    assert run_cli("verify", loop, "--trust-key", key.with_name("k.pub.pem")).code == 0


def test_keygen_writes_a_private_key_only_its_owner_reads(run_cli, tmp_path) -> None:
    assert run_cli("keygen", tmp_path / "k.pem").code == 0
    assert (tmp_path / "k.pem").stat().st_mode & 0o777 == 0o600
    assert "BEGIN PRIVATE KEY" in (tmp_path / "k.pem").read_text()
    assert "BEGIN PUBLIC KEY" in (tmp_path / "k.pub.pem").read_text()
    again = run_cli("keygen", tmp_path / "k.pem")
    assert again.code == 2 and "exists" in again.err


def test_two_skills_share_one_cartridge_and_index(run_cli, tmp_path) -> None:
    run_cli("keygen")
    a, b = _skill(tmp_path, "skill-a"), _skill(tmp_path, "skill-b")
    out = tmp_path / "two.acx"
    assert run_cli("pack", a, b, "-o", out, "--publisher", PUB, "--id", "bundle").code == 0
    result = run_cli("inspect", out)
    assert result.code == 0
    for name in ("skill-a", "skill-b"):
        assert f"rom/skills/{name}/SKILL.md" in result.out
    assert shutil.which("sqlite3")


# --- commands that write: never through a link, all or nothing, nothing left behind ---------


def _acxfs(*argv: object, preexec=None, **kw) -> subprocess.CompletedProcess[str]:
    """The installed `acxfs` command in a child process (for what an in-process call cannot
    show: signals, dropped privileges, resource limits, the umask)."""
    return subprocess.run([*acxfs_command(), *map(str, argv)], capture_output=True, text=True,
                          preexec_fn=preexec, timeout=120, **kw)


def _left_behind(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def test_keygen_replaces_a_planted_link_instead_of_writing_through_it(run_cli, tmp_path) -> None:
    victim = tmp_path / "victim"
    precious = tmp_path / "precious"
    precious.write_text("important\n")
    (tmp_path / "k.pem").symlink_to(victim)  # dangling: still something not to write through
    refused = run_cli("keygen", tmp_path / "k.pem")
    assert refused.code == 2 and "exists; pass --force" in refused.err
    (tmp_path / "k.pub.pem").symlink_to(precious)
    assert run_cli("keygen", "--force", tmp_path / "k.pem").code == 0
    assert not victim.exists() and precious.read_text() == "important\n"
    for name in ("k.pem", "k.pub.pem"):
        assert not (tmp_path / name).is_symlink()
    assert (tmp_path / "k.pem").stat().st_mode & 0o777 == 0o600
    assert _left_behind(tmp_path) == []


def test_a_failed_keygen_leaves_the_old_pair_whole(run_cli, tmp_path) -> None:
    key = tmp_path / "k.pem"
    assert run_cli("keygen", key).code == 0
    old = key.read_text()
    (tmp_path / "k.pub.pem").unlink()
    (tmp_path / "k.pub.pem").mkdir()  # a public key cannot be renamed over a non-empty directory
    (tmp_path / "k.pub.pem" / "keep").write_text("x")
    result = run_cli("keygen", "--force", key)
    assert result.code == 2 and result.err.count("\n") == 1, result.err
    assert key.read_text() == old
    assert _left_behind(tmp_path) == []


def test_pack_refuses_a_directory_it_cannot_list_instead_of_leaving_it_out(tmp_path) -> None:
    assert shutil.which("setpriv"), "util-linux setpriv drops root's right to read anything"
    assert _acxfs("keygen", tmp_path / "k.pem").returncode == 0
    skill = _skill(tmp_path, "hidden-skill", extra={"references/secret/a.md": b"a\n"})
    (skill / "references" / "secret").chmod(0)
    try:
        caps = "-dac_override,-dac_read_search"
        result = subprocess.run(
            ["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}", "--", *acxfs_command(),
             "pack", str(skill), "-o", str(tmp_path / "out" / "x.acx"), "--publisher", PUB,
             "--key", str(tmp_path / "k.pem")], capture_output=True, text=True, timeout=120)
    finally:
        (skill / "references" / "secret").chmod(0o755)
    assert result.returncode == 2, result.stderr
    assert result.stderr == (f"acxfs: error: cannot list {skill}/references/secret "
                             "(Permission denied); nothing packed\n")
    assert not (tmp_path / "out").exists()


def test_pack_refuses_paths_deeper_or_longer_than_readers_accept(run_cli, tmp_path) -> None:
    run_cli("keygen")
    deep = "/".join(f"d{i}" for i in range(66)) + "/f.md"
    skill = _skill(tmp_path, "deep-skill", extra={deep: b"deep\n"})
    result = run_cli("pack", skill, "-o", tmp_path / "x.acx", "--publisher", PUB)
    assert result.code == 1 and "path deeper than 64 segments" in result.err, result.err
    assert not (tmp_path / "x.acx").exists()


def test_pack_out_of_space_is_one_line_and_leaves_nothing(tmp_path) -> None:
    import resource
    import signal

    assert _acxfs("keygen", tmp_path / "k.pem").returncode == 0
    skill = _skill(tmp_path, "big-skill", extra={"assets/noise.bin": os.urandom(4 << 20)})

    def small_files() -> None:  # writes past 1 MiB fail (EFBIG) instead of killing the process
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))

    result = _acxfs("pack", skill, "-o", tmp_path / "new" / "dir" / "x.acx", "--publisher", PUB,
                    "--key", tmp_path / "k.pem", preexec=small_files)
    assert result.returncode == 2 and result.stderr.startswith(
        f"acxfs: error: cannot write {tmp_path}/new/dir/x.acx ("), result.stderr
    assert result.stderr.count("\n") == 1
    assert not (tmp_path / "new").exists()


@pytest.mark.slow  # packs 96 MiB in a child
def test_pack_stopped_by_sigterm_removes_its_temporary_file(tmp_path) -> None:
    import signal

    proc, out_dir = _slow_pack(tmp_path)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err == "acxfs: interrupted\n", (proc.returncode, err)
    assert list(out_dir.iterdir()) == []


def test_parallel_trust_adds_of_one_key_all_succeed(run_cli, tmp_path) -> None:
    assert run_cli("keygen", tmp_path / "k.pem").code == 0
    procs = [subprocess.Popen([*acxfs_command(), "trust", "add", str(tmp_path / "k.pub.pem"),
                               "--publisher", PUB], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for _ in range(12)]
    errors = [proc.communicate(timeout=60)[1] for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * 12, errors
    pins = tmp_path / "trust" / "pins"
    assert [p.suffix for p in pins.iterdir()] == [".json"]
    assert json.loads(next(pins.iterdir()).read_text())["publisherId"] == PUB


def test_trust_add_never_writes_through_a_link_planted_beside_the_pin(run_cli, tmp_path) -> None:
    from acxfs.signing.keys import load_public_key_file
    from acxfs.trust.store import pin_path

    assert run_cli("keygen", tmp_path / "k.pem").code == 0
    key = load_public_key_file(str(tmp_path / "k.pub.pem"))
    pin = pin_path(tmp_path / "trust", key.keyid)
    pin.parent.mkdir(parents=True)
    victim = tmp_path / "victim"
    pin.with_suffix(".tmp").symlink_to(victim)  # the fixed name an earlier version wrote to
    assert run_cli("trust", "add", tmp_path / "k.pub.pem", "--publisher", PUB).code == 0
    assert not victim.exists() and not pin.is_symlink()
    assert json.loads(pin.read_text())["keyid"] == key.keyid


def _wait_for_temporary_file(proc: subprocess.Popen[str], directory: Path) -> None:
    import time

    deadline = time.monotonic() + 60
    while not _left_behind(directory) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert _left_behind(directory), "pack never wrote its temporary file (or ended first)"


def _slow_pack(tmp_path: Path, preexec=None) -> tuple[subprocess.Popen[str], Path]:
    assert _acxfs("keygen", tmp_path / "k.pem").returncode == 0
    skill = _skill(tmp_path, "slow-skill", extra={"assets/noise.bin": os.urandom(96 << 20)})
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    proc = subprocess.Popen([*acxfs_command(), "pack", str(skill), "-o", str(out_dir / "x.acx"),
                             "--publisher", PUB, "--key", str(tmp_path / "k.pem")],
                            stderr=subprocess.PIPE, text=True, preexec_fn=preexec)
    _wait_for_temporary_file(proc, out_dir)
    return proc, out_dir


@pytest.mark.slow  # packs and extracts 6,000 files in a child
def test_a_second_sigterm_does_not_cut_the_clean_up_short(tmp_path) -> None:
    import signal
    import time

    assert _acxfs("keygen", tmp_path / "k.pem").returncode == 0
    files = {f"assets/f{i:05d}.txt": f"{i}\n".encode() for i in range(6000)}
    skill = _skill(tmp_path, "many-skill", extra=files)
    cart = tmp_path / "many.acx"
    assert _acxfs("pack", skill, "-o", cart, "--publisher", PUB,
                  "--key", tmp_path / "k.pem").returncode == 0
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.Popen([*acxfs_command(), "extract", str(cart), str(work / "out"),
                             "--trust-key", str(tmp_path / "k.pub.pem")], stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 60
    written = 0
    while written < 3000 and proc.poll() is None and time.monotonic() < deadline:
        staging = [p for p in work.iterdir() if p.name.startswith(".acxfs-")]
        assets = staging[0] / "rom" / "skills" / "many-skill" / "assets" if staging else None
        written = len(os.listdir(assets)) if assets and assets.is_dir() else 0
    assert written >= 3000, "extract ended before it had written half its files"
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.01)  # the second arrives while the first one's clean-up removes those files
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err == "acxfs: interrupted\n", (proc.returncode, err)
    assert list(work.iterdir()) == []


@pytest.mark.slow  # packs 96 MiB in a child
def test_pack_under_nohup_ignores_sighup(tmp_path) -> None:
    import signal

    proc, out_dir = _slow_pack(tmp_path, preexec=lambda: signal.signal(signal.SIGHUP,
                                                                       signal.SIG_IGN))
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert [p.name for p in out_dir.iterdir()] == ["x.acx"]


def test_keygen_refuses_a_directory_target_and_keeps_the_pair(run_cli, tmp_path) -> None:
    key = tmp_path / "k.pem"
    assert run_cli("keygen", key).code == 0
    public = (tmp_path / "k.pub.pem").read_text()
    key.unlink()
    key.mkdir()
    result = run_cli("keygen", "--force", key)
    assert result.code == 2 and result.err == f"acxfs: error: {key}: is a directory\n"
    assert (tmp_path / "k.pub.pem").read_text() == public
    assert _left_behind(tmp_path) == []


def test_a_file_with_the_bytes_of_a_cartridge_fact_is_refused_before_writing(run_cli,
                                                                            tmp_path) -> None:
    from acxfs.signing.jcs import canonical_bytes

    run_cli("keygen")
    fact = canonical_bytes({"key": "acx.artifact_version", "value": "1.0.0"})
    skill = _skill(tmp_path, "fact-skill", extra={"assets/fact.json": fact})
    result = run_cli("pack", skill, "-o", tmp_path / "x.acx", "--publisher", PUB)
    assert result.code == 1, result.err
    assert result.err == ("acxfs: error: rom/skills/fact-skill/assets/fact.json has the same "
                          "bytes as the signed form of cartridge:acx.artifact_version; ACX 0.1 "
                          "keys objects by content hash (make the file differ)\n")
    assert not (tmp_path / "x.acx").exists()


def test_keys_and_pins_honour_the_umask(run_cli, tmp_path) -> None:
    old = os.umask(0o077)
    try:
        assert run_cli("keygen", tmp_path / "k.pem").code == 0
        assert run_cli("trust", "add", tmp_path / "k.pub.pem", "--publisher", PUB).code == 0
    finally:
        os.umask(old)
    assert (tmp_path / "k.pub.pem").stat().st_mode & 0o777 == 0o600
    pins = list((tmp_path / "trust" / "pins").iterdir())
    assert [p.stat().st_mode & 0o777 for p in pins] == [0o600]


def test_a_directory_another_process_makes_meanwhile_is_used_not_claimed(tmp_path,
                                                                        monkeypatch) -> None:
    from acxfs.safe import dirs as safe_dirs

    real_mkdir = os.mkdir

    def racing_mkdir(path, mode=0o777, *, dir_fd=None):  # the other process wins "shared"
        if os.path.basename(path) == "shared":
            real_mkdir(path, dir_fd=dir_fd)
        real_mkdir(path, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "mkdir", racing_mkdir)
    with safe_dirs.make_dirs(tmp_path / "shared" / "mine") as made:
        assert made.made == [str(tmp_path / "shared" / "mine")]
        made.remove_made()
    assert (tmp_path / "shared").is_dir()
