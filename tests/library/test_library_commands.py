"""The skills library through the real `acxfs` command: add, list, remove, up, down.

Every test runs in the isolated HOME of conftest (the library lands in
`$HOME/.local/share/acxfs`), through real mounts, and stops the library daemon at the end;
a daemon or mount left behind fails the test.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from scripts import cartwriter as cw
from scripts.mounting import acxfs, acxfs_command, acxfs_mounts_under
from tests.support import FIXTURES
from tests.support.library import agent_dirs, data_dir, home, listing

pytestmark = [pytest.mark.fuse, pytest.mark.slow, pytest.mark.usefixtures("library_stops")]

REAL = FIXTURES / "real"
AZP = FIXTURES / "azp" / "com.hereliesaz.azphalt.dev-workflow-skills-1.0.0.azp"


def snapshot(root: Path) -> dict[str, str]:
    """Every path below `root` with what it is (a file's bytes hashed, a link's target)."""
    seen: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                seen[rel] = "-> " + os.readlink(path)
                if name in dirnames:
                    dirnames.remove(name)
            elif path.is_dir():
                seen[rel] = "dir"
            elif not path.is_file():
                seen[rel] = "special"
            else:
                seen[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return seen


def write_skill(root: Path, name: str, description: str = "A test skill.") -> Path:
    skill = root / name
    (skill / "references").mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\nUse it.\n")
    (skill / "references" / "guide.md").write_text(f"How to use {name}.\n")
    return skill


def pack(tmp_path: Path, *names: str, publisher: str = "io.github.tester",
         artifact: str | None = None, version: str = "1.0.0", deflate: str = "zlib") -> Path:
    src = tmp_path / f"src-{artifact or names[0]}-{version}"
    dirs = [write_skill(src, name) for name in names]
    out = tmp_path / f"{artifact or names[0]}-{version}.acx"
    args: list[object] = ["pack", *dirs, "-o", out, "--publisher", publisher,
                          "--version", version, "--deflate", deflate]
    if artifact:
        args += ["--id", artifact]
    result = acxfs(*args)
    assert result.returncode == 0, result.stderr
    return out


def test_add_links_every_skill_for_both_agent_directories(tmp_path: Path, local_key: None) -> None:
    cart = pack(tmp_path, "alpha-skill", "beta-skill", artifact="pair")
    result = acxfs("add", cart)
    assert result.returncode == 0, result.stderr
    for agent_dir in agent_dirs():
        for name in ("alpha-skill", "beta-skill"):
            link = agent_dir / name
            assert link.is_symlink()
            target = Path(os.readlink(link))
            assert target.parent.parent == data_dir() / "mnt"
            assert target.parent.name.startswith("io.github.tester+pair@")
            text = (link / "SKILL.md").read_text()
            assert f"name: {name}" in text
    assert "alpha-skill" in result.stdout and "beta-skill" in result.stdout
    doc = listing()
    bundles = doc["bundles"]
    assert isinstance(bundles, list) and len(bundles) == 1
    assert bundles[0]["identity"] == "io.github.tester/pair"
    assert bundles[0]["served"] is True


def test_remove_leaves_home_as_before_but_library_state(tmp_path: Path, local_key: None) -> None:
    cart = pack(tmp_path, "gamma-skill")
    (home() / ".claude" / "skills").mkdir(parents=True)
    before = snapshot(home())
    assert acxfs("add", cart).returncode == 0
    assert (home() / ".claude" / "skills" / "gamma-skill").is_symlink()
    result = acxfs("remove", "gamma-skill")
    assert result.returncode == 0, result.stderr
    assert acxfs("down").returncode == 0
    after = snapshot(home())
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    own = {k for k in changed if k.startswith(".local/share/acxfs") or k in (
        ".local", ".local/share", ".agents", ".agents/skills")}
    assert changed == own, sorted(changed - own)
    assert not list((data_dir() / "store").iterdir())


def test_untrusted_bundle_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    before = snapshot(home())
    result = acxfs("add", REAL / "rex-calder-1.0.0.acx")
    assert result.returncode == 4
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "warning / portable" in lines[0] and "trust add" in lines[0]
    assert "Traceback" not in result.stderr
    after = snapshot(home())
    assert {k: v for k, v in after.items() if not k.startswith(".local")} == \
        {k: v for k, v in before.items() if not k.startswith(".local")}
    assert not (home() / ".claude" / "skills" / "expertise-security-expert").exists()


def test_users_own_skill_is_never_replaced(tmp_path: Path, local_key: None) -> None:
    mine = write_skill(home() / ".claude" / "skills", "delta-skill", "Mine.")
    cart = pack(tmp_path, "delta-skill")
    result = acxfs("add", cart)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and str(mine) in result.stderr
    assert (mine / "SKILL.md").read_text().endswith("Use it.\n")
    assert "description: Mine." in (mine / "SKILL.md").read_text()
    assert not (home() / ".agents" / "skills" / "delta-skill").exists()
    assert not list((data_dir() / "store").iterdir())


def test_second_bundle_with_a_taken_skill_name_is_refused(tmp_path: Path, local_key: None) -> None:
    first = pack(tmp_path, "eps-skill", artifact="first")
    second = pack(tmp_path, "eps-skill", artifact="second")
    assert acxfs("add", first).returncode == 0
    link_before = os.readlink(home() / ".claude" / "skills" / "eps-skill")
    result = acxfs("add", second)
    assert result.returncode == 1
    assert "eps-skill" in result.stderr and "io.github.tester/first" in result.stderr
    assert os.readlink(home() / ".claude" / "skills" / "eps-skill") == link_before
    assert len(list((data_dir() / "store").iterdir())) == 1


def test_tampered_byte_is_refused(tmp_path: Path, local_key: None) -> None:
    cart = pack(tmp_path, "zeta-skill")
    data = bytearray(cart.read_bytes())
    at = data.find(b"Use it.")
    if at < 0:  # compressed: flip a byte inside the sqlar data instead
        at = len(data) // 2
    data[at] ^= 0x01
    cart.write_bytes(bytes(data))
    result = acxfs("add", cart)
    assert result.returncode != 0
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert not (home() / ".claude" / "skills" / "zeta-skill").exists()


def test_real_cartridges_and_azp_served_by_one_daemon(tmp_path: Path) -> None:
    for cart, publisher in (("rex-calder-1.0.0.acx", "io.github.calder-sec"),
                            ("ada-ridge-1.0.0.acx", "io.github.ridgeworks")):
        trusted = acxfs("trust", "add", REAL / cart, "--publisher", publisher)
        assert trusted.returncode == 0, trusted.stderr
    registry = acxfs("trust", "add", REAL / "scenario-research-designer.acx",
                     "--publisher", "io.github.agentibus")
    assert registry.returncode == 0, registry.stderr
    azp_trust = acxfs("trust", "add", AZP)
    assert azp_trust.returncode == 0, azp_trust.stderr
    result = acxfs("add", REAL / "rex-calder-1.0.0.acx", REAL / "ada-ridge-1.0.0.acx",
                   REAL / "scenario-research-designer.acx", AZP)
    assert result.returncode == 0, result.stderr
    doc = listing()
    pids = {doc["daemon"]["pid"]} if isinstance(doc.get("daemon"), dict) else set()
    assert len(pids) == 1
    bundles = doc["bundles"]
    assert isinstance(bundles, list) and len(bundles) == 4
    skills = [s for b in bundles for s in b["skills"]]
    assert len(skills) == 3 + 6
    for name in skills:
        for agent_dir in agent_dirs():
            assert (agent_dir / name / "SKILL.md").is_file()
    extracted = tmp_path / "extracted"
    assert acxfs("extract", REAL / "rex-calder-1.0.0.acx", extracted,
                 "--skill", "expertise-security-expert").returncode == 0
    diff = subprocess.run(["diff", "-r", extracted,
                           home() / ".claude" / "skills" / "expertise-security-expert"],
                          capture_output=True, text=True, check=False)
    assert diff.returncode == 0, diff.stdout + diff.stderr
    validate = shutil.which("agentskills")
    assert validate is not None
    for name in skills:
        checked = subprocess.run([validate, "validate", home() / ".agents" / "skills" / name],
                                 capture_output=True, text=True, check=False)
        assert checked.returncode == 0, (name, checked.stdout, checked.stderr)


def test_store_byte_changed_under_daemon_is_eio_and_listed(tmp_path: Path, local_key: None) -> None:
    cart = pack(tmp_path, "eta-skill", deflate="none")
    assert acxfs("add", cart).returncode == 0
    (stored,) = (data_dir() / "store").iterdir()
    data = bytearray(stored.read_bytes())
    at = data.find(b"Use it.")
    assert at > 0
    data[at] ^= 0x20
    os.chmod(stored, 0o600)
    with open(stored, "r+b") as handle:
        handle.write(bytes(data))
    skill_md = home() / ".claude" / "skills" / "eta-skill" / "SKILL.md"
    with pytest.raises(OSError) as caught:
        skill_md.read_bytes()
    assert caught.value.errno == 5
    failures = listing()["failures"]
    assert isinstance(failures, list) and any("SKILL.md" in f["path"] for f in failures)


def test_up_after_trust_remove_stops_serving(tmp_path: Path) -> None:
    pinned = acxfs("trust", "add", REAL / "rex-calder-1.0.0.acx", "--publisher",
                   "io.github.calder-sec")
    assert pinned.returncode == 0, pinned.stderr
    assert acxfs("add", REAL / "rex-calder-1.0.0.acx").returncode == 0
    link = home() / ".claude" / "skills" / "expertise-security-expert"
    assert (link / "SKILL.md").is_file()
    assert acxfs("down").returncode == 0
    assert not (link / "SKILL.md").exists()  # down: the link dangles (fail closed)
    keyid = "ed25519:fa825aaee84b8847f5e0ee8c8f924a1433db80676da431e037683f7e812c157a"
    assert acxfs("trust", "remove", keyid).returncode == 0
    result = acxfs("up")
    assert result.returncode == 0, result.stderr
    assert not (link / "SKILL.md").exists()
    (bundle,) = listing()["bundles"]
    assert bundle["served"] is False and "portable" in bundle["why"]


@pytest.mark.parametrize("step", ["add:intent", "add:link", "add:commit", "add:cleanup"])
def test_add_killed_at_each_step_leaves_old_or_new_library(tmp_path: Path, local_key: None,
                                                            step: str) -> None:
    cart = pack(tmp_path, "theta-skill", "iota-skill", artifact="killed")
    killed = subprocess.run(
        [*acxfs_command(),
         "add", str(cart)], env={**os.environ, "ACXFS_TEST_KILL_AT": step},
        capture_output=True, text=True, timeout=60, check=False)
    assert killed.returncode == -9
    assert acxfs("list").returncode == 0  # any command finishes the change first
    links = [home() / d / "skills" / n for d in (".agents", ".claude")
             for n in ("theta-skill", "iota-skill")]
    present = [p.is_symlink() for p in links]
    assert all(present)  # the intent was written: the change is carried to its end
    assert all((p / "SKILL.md").is_file() for p in links)


def test_add_killed_before_its_intent_leaves_the_old_library(tmp_path: Path,
                                                             local_key: None) -> None:
    cart = pack(tmp_path, "kappa-skill")
    command = acxfs_command()
    killed = subprocess.run([*command, "add", str(cart)],
                            env={**os.environ, "ACXFS_TEST_KILL_AT": "add:checked"},
                            capture_output=True, text=True, timeout=60, check=False)
    assert killed.returncode == -9
    assert acxfs("list").returncode == 0
    assert not (home() / ".claude" / "skills" / "kappa-skill").exists()
    assert not list((data_dir() / "store").iterdir())


def test_add_killed_after_the_daemon_loaded_it_leaves_nothing_served(tmp_path: Path,
                                                                      local_key: None) -> None:
    assert acxfs("add", pack(tmp_path, "omicron-skill")).returncode == 0  # the daemon runs
    cart = pack(tmp_path, "pi-skill")
    killed = subprocess.run([*acxfs_command(), "add", str(cart)],
                            env={**os.environ, "ACXFS_TEST_KILL_AT": "add:served"},
                            capture_output=True, text=True, timeout=60, check=False)
    assert killed.returncode == -9
    def served() -> list[str]:
        return sorted(name.split("@")[0] for name in os.listdir(data_dir() / "mnt"))

    assert "io.github.tester+pi-skill" in served()  # loaded by the daemon before the kill
    assert acxfs("list").returncode == 0  # the orphan is removed, and the daemon drops it
    assert served() == ["io.github.tester+omicron-skill"]
    assert not (home() / ".claude" / "skills" / "pi-skill").exists()
    assert [b["identity"] for b in listing()["bundles"]] == ["io.github.tester/omicron-skill"]
    assert len(list((data_dir() / "store").iterdir())) == 1


def test_add_finished_after_its_agent_directory_became_a_foreign_link(tmp_path: Path,
                                                                       local_key: None) -> None:
    cart = pack(tmp_path, "rho-skill")
    killed = subprocess.run([*acxfs_command(), "add", str(cart)],
                            env={**os.environ, "ACXFS_TEST_KILL_AT": "add:intent"},
                            capture_output=True, text=True, timeout=60, check=False)
    assert killed.returncode == -9
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    os.chown(foreign, 65534, 65534)
    claude = home() / ".claude" / "skills"
    claude.parent.mkdir(parents=True, exist_ok=True)
    claude.symlink_to(foreign)  # made after the change was checked and written down
    result = acxfs("list", "--json")  # finishes the change: that link is left alone, said so
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and f"{claude}: " in result.stderr
    assert not list(foreign.iterdir())
    assert (home() / ".agents" / "skills" / "rho-skill" / "SKILL.md").is_file()
    (bundle,) = json.loads(result.stdout)["bundles"]
    states = {link["path"]: link["state"] for link in bundle["links"]}
    assert states == {str(home() / ".agents" / "skills" / "rho-skill"): "ok",
                      str(claude / "rho-skill"): "changed"}
    assert not (data_dir() / "intent.json").exists()
    assert acxfs("remove", "rho-skill").returncode == 0
    assert not list(foreign.iterdir())


def test_up_in_the_foreground_while_the_daemon_runs_starts_no_second_one(
        tmp_path: Path, local_key: None) -> None:
    assert acxfs("add", pack(tmp_path, "sigma-skill")).returncode == 0
    pid = listing()["daemon"]["pid"]
    result = acxfs("up", "-f")
    assert result.returncode == 0, result.stderr
    assert "already serves" in result.stdout and "Traceback" not in result.stderr
    assert listing()["daemon"]["pid"] == pid
    assert acxfs_mounts_under(home()) == [os.path.realpath(data_dir() / "mnt")]


@pytest.mark.parametrize("step", ["remove:intent", "remove:unlink", "remove:commit",
                                  "remove:cleanup", "remove_symlink_at:unlink"])
def test_remove_killed_at_each_step_finishes_the_removal(tmp_path: Path, local_key: None,
                                                         step: str) -> None:
    cart = pack(tmp_path, "lambda-skill", "mu-skill", artifact="gone")
    assert acxfs("add", cart).returncode == 0
    command = acxfs_command()
    killed = subprocess.run([*command, "remove", "io.github.tester/gone"],
                            env={**os.environ, "ACXFS_TEST_KILL_AT": step},
                            capture_output=True, text=True, timeout=60, check=False)
    assert killed.returncode == -9
    assert acxfs("list").returncode == 0
    for d in (".agents", ".claude"):
        for n in ("lambda-skill", "mu-skill"):
            assert not (home() / d / "skills" / n).is_symlink()
    assert not list((data_dir() / "store").iterdir())
    assert listing()["bundles"] == []
    for d in (".agents", ".claude"):  # nor a temporary entry a killed step made
        assert os.listdir(home() / d / "skills") == []


def test_identity_that_differs_from_the_signed_publisher_is_refused(
        tmp_path: Path, make_cartridge: Callable[..., Path], signer: cw.Signer) -> None:
    cart = make_cartridge("liar.acx", publisher="io.github.victim")
    conn = sqlite3.connect(cart)
    statement = cw.statement_for(conn, signed_at=cw.SIGNED_AT)
    statement["predicate"]["publisherId"] = "io.github.liar"  # trust is decided for this one
    conn.execute("UPDATE signatures SET envelope = ?", (cw.sign_envelope(cw.jcs(statement),
                                                                          signer),))
    conn.commit()
    conn.close()
    key = tmp_path / "liar.pub.pem"
    key.write_text(signer.public_pem)
    assert acxfs("trust", "add", key, "--publisher", "io.github.liar").returncode == 0
    verdict = acxfs("verify", cart)
    assert verdict.stdout.startswith("verified / trusted"), verdict.stdout + verdict.stderr
    result = acxfs("add", cart)
    assert result.returncode != 0
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "io.github.victim" in result.stderr and "io.github.liar" in result.stderr
    assert not (home() / ".claude" / "skills").exists() or \
        not list((home() / ".claude" / "skills").iterdir())
    assert not (data_dir() / "store").exists() or not list((data_dir() / "store").iterdir())


def test_bad_skill_name_is_refused(make_cartridge: Callable[..., Path], signer: cw.Signer,
                                   tmp_path: Path) -> None:
    files = {"rom/skills/Bad_Name/SKILL.md":
             b"---\nname: Bad_Name\ndescription: Not an Agent Skills name.\n---\nbody\n"}
    cart = make_cartridge("bad.acx", files=files, capabilities={}, memories={})
    key = tmp_path / "bad.pub.pem"
    key.write_text(signer.public_pem)
    assert acxfs("trust", "add", key, "--publisher", "io.github.example").returncode == 0
    result = acxfs("add", cart)
    assert result.returncode != 0
    assert result.stderr.count("\n") == 1 and "Bad_Name" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (home() / ".claude" / "skills" / "Bad_Name").exists()


def test_control_socket_answers_only_its_owner(tmp_path: Path, local_key: None) -> None:
    assert acxfs("add", pack(tmp_path, "nu-skill")).returncode == 0
    sock = data_dir() / "control" / "daemon.sock"
    assert oct(os.stat(sock.parent).st_mode & 0o777) == "0o700"
    script = (
        "import os, socket, sys\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "s.settimeout(5)\n"
        "try:\n"
        "    s.connect(sys.argv[1])\n"
        "except PermissionError:\n"
        "    print('refused'); sys.exit(0)\n"
        "s.sendall(b'{\"op\": \"status\"}\\n')\n"
        "print('answer:', s.recv(65536))\n"
    )
    # Past the directory's mode (a copy of the socket where anyone can reach it), the daemon
    # itself checks the peer's uid and closes the connection unanswered.
    open_dir = tmp_path / "open"
    open_dir.mkdir(mode=0o777)
    open_dir.chmod(0o777)
    os.link(sock, open_dir / "daemon.sock")
    (open_dir / "daemon.sock").chmod(0o777)
    for path in (sock, open_dir / "daemon.sock"):
        done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                              text=True, timeout=30, check=False)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() in ("refused", "answer: b''"), done.stdout


def test_library_keeps_the_trust_store_it_was_made_with(tmp_path: Path, local_key: None,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    assert acxfs("add", pack(tmp_path, "xi-skill")).returncode == 0
    made_with = os.environ["ACXFS_TRUST_DIR"]
    monkeypatch.setenv("ACXFS_TRUST_DIR", str(tmp_path / "another-store"))
    result = acxfs("list", "--json")
    assert result.returncode == 0
    assert f"the library uses the trust store {made_with}" in result.stderr
    assert json.loads(result.stdout)["trustStore"] == made_with
    assert json.loads(result.stdout)["bundles"][0]["served"] is True
