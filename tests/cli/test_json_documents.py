"""`--json`: every command that reports has it, prints one document on stdout carrying the
fields docs/json.md documents (the tables are read from the page itself, so the page cannot
drift), and a command that fails prints `{"error", "exit"}` with its exit code.

Each documented command has scenarios here: its answer (also a refusal that still answers,
such as `verify` of a tampered cartridge) and at least one failure. The slow tests run the real
`acxfs` command: a live mount for `status`, a real registry for `push`.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from acxfs.cli import build_parser, main
from acxfs.cli.completion import commands
from scripts.mounting import acxfs, mounted
from tests.support import REPO
from tests.support.demo import PUBLISHER

PAGE = REPO / "docs" / "json.md"
AZP = REPO / "tests" / "fixtures" / "azp" / "signed-valid.azp"
TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "boolean": (bool,), "array": (list,),
    "object": (dict,), "null": (type(None),),
}


class Field(NamedTuple):
    path: str  # `a`, `a.b`, `a[].b`
    types: tuple[type, ...]
    optional: bool


def _table(lines: list[str]) -> list[Field]:
    fields = []
    for line in lines:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        found = re.fullmatch(r"`([A-Za-z0-9_.\[\]]+)`", cells[0]) if len(cells) >= 3 else None
        if found is None:
            continue
        kinds, _, flag = cells[1].partition(", ")
        assert flag in ("", "optional"), line
        names = kinds.split(" or ")
        assert all(n in TYPES for n in names), line
        fields.append(Field(found[1], tuple(t for n in names for t in TYPES[n]),
                            flag == "optional"))
    return fields


def documented() -> dict[str, list[Field]]:
    """Heading (`verify --json`, or `error` for the error document) -> its fields."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            head = re.fullmatch(r"## `([a-z -]+ --json)`", line)
            current = head[1] if head else "error" if line == "## The error document" else None
            if current is not None:
                sections[current] = []
        elif current is not None:
            sections[current].append(line)
    return {name: _table(lines) for name, lines in sections.items()}


DOCS = documented()
COMMANDS = sorted(name for name in DOCS if name != "error")


def _values(doc: object, path: str, optional: bool) -> list[object]:
    """The values at `path` in `doc` (`a[].b`: in every element of `a`)."""
    values = [doc]
    for part in path.split("."):
        name = part.removesuffix("[]")
        found: list[object] = []
        for value in values:
            assert isinstance(value, dict), (path, value)
            if name not in value:
                assert optional, f"{path}: missing from {value}"
                continue
            if part.endswith("[]"):
                assert isinstance(value[name], list), (path, value[name])
                found += value[name]
            else:
                found.append(value[name])
        values = found
    return values


def check_document(command: str, doc: object) -> None:
    """`doc` has every field documented for `command`, of its type, and no other."""
    fields = DOCS[command]
    for field in fields:
        for value in _values(doc, field.path, field.optional):
            assert isinstance(value, field.types) and not (
                isinstance(value, bool) and bool not in field.types), (field, value)
    containers = {f.path.rpartition(".")[0] for f in fields}
    for container in containers:
        known = {f.path.rpartition(".")[2] for f in fields
                 if f.path.rpartition(".")[0] == container}
        for value in _values(doc, container, True) if container else [doc]:
            assert isinstance(value, dict)
            assert set(value) <= known, f"{command}: undocumented {set(value) - known}"


def check_error(result: Any, code: int) -> dict[str, object]:
    """The error document: the line stderr carries, the exit code the command returned."""
    doc: dict[str, object] = json.loads(result.out)
    check_document("error", doc)
    assert set(doc) == {"error", "exit"}
    assert (result.code, doc["exit"]) == (code, code), (result, doc)
    assert doc["error"] in result.err.splitlines(), (doc, result.err)
    return doc


# --- the scenarios: each documented command's answers and failures --------------------------


class Case(NamedTuple):
    argv: list[object]
    code: int
    answers: bool  # True: the command's document; False: the error document


Scenario = Callable[[Path, Any, Any], list[Case]]  # (tmp_path, make_cartridge, registry)


def _tampered(cart: Path) -> Path:
    conn = sqlite3.connect(cart)
    conn.execute("UPDATE sqlar SET data = CAST('x' AS BLOB) WHERE name LIKE 'rom/knowledge/%'")
    conn.commit()
    conn.close()
    return cart


def _verify(tmp: Path, make: Any, reg: Path) -> list[Case]:
    cart = make()
    return [Case(["verify", cart, "--registry", reg], 0, True),
            Case(["verify", "--quick", cart], 4, True),  # untrusted here: still an answer
            Case(["verify", _tampered(make("bad.acx")), "--registry", reg], 5, True),
            Case(["verify", tmp / "none.acx"], 2, False),
            Case(["verify"], 2, False)]


def _inspect(tmp: Path, make: Any, reg: Path) -> list[Case]:
    (tmp / "junk.acx").write_bytes(b"not a cartridge")
    return [Case(["inspect", make(), "--registry", reg], 0, True),
            Case(["inspect", AZP], 0, True),
            Case(["inspect", tmp / "junk.acx"], 6, True),
            Case(["inspect", tmp / "none.acx"], 2, False)]


def _ls(tmp: Path, make: Any, reg: Path) -> list[Case]:
    cart = make()
    return [Case(["ls", cart, "--registry", reg], 0, True),
            Case(["ls", cart, "rom/knowledge/NOTES.md", "--registry", reg], 0, True),
            Case(["ls", cart], 4, False),  # untrusted: refused on its verdict
            Case(["ls", cart, "rom/none", "--registry", reg], 2, False)]


def _status(tmp: Path, make: Any, reg: Path) -> list[Case]:
    return [Case(["status"], 0, True), Case(["status", "extra"], 2, False)]


def _list(tmp: Path, make: Any, reg: Path) -> list[Case]:
    return [Case(["list"], 0, True), Case(["list", "--project"], 2, False)]


def _trust_list(tmp: Path, make: Any, reg: Path) -> list[Case]:
    cart, trust = make(), tmp / "trust"
    return [Case(["trust", "add", cart], 0, True),  # not --json: the setup of the next
            Case(["trust", "add", reg], 0, True),
            Case(["trust", "list"], 0, True),
            Case(["trust", "list", "--bogus"], 2, False),
            Case(["policy", trust / "policy.json"], 0, True),  # a policy.json in the store
            Case(["trust", "list"], 0, True)]


LOCKED = {"identity": f"{PUBLISHER}/demo", "format": "acx", "version": "1.0.0",
          "sha256": "a" * 64, "bytes": 1, "manifest": "sha256:" + "b" * 64,
          "keyid": "ed25519:" + "c" * 64, "publisher": PUBLISHER, "skills": ["demo"],
          "agents": ["agents", "claude"], "source": {"file": "demo-1.0.0.acx"}}


def _sync_check(tmp: Path, make: Any, reg: Path) -> list[Case]:
    empty, differs = tmp / "empty", tmp / "differs"
    for directory, bundles in ((empty, []), (differs, [LOCKED])):
        directory.mkdir()
        (directory / "acxfs.lock").write_text(
            json.dumps({"schema": "acxfs.lock/1", "bundles": bundles}, indent=2) + "\n")
    return [Case(["sync", "--check", "--project", empty], 0, True),
            Case(["sync", "--check", "--project", differs], 1, True),
            Case(["sync", "--check", "--project", tmp], 2, False),  # no lock
            Case(["sync", "--project", empty], 2, False)]  # --json is for --check


def _update_check(tmp: Path, make: Any, reg: Path) -> list[Case]:
    return [Case(["update", "--check"], 0, True),
            Case(["update", "--check", "nothing-installed"], 1, False),
            Case(["update", "research.acx"], 2, False)]  # --json is for --check


def _refresh(tmp: Path, make: Any, reg: Path) -> list[Case]:
    return [Case(["refresh"], 0, True), Case(["refresh", "--offline"], 0, True),
            Case(["refresh", "--every", "2s"], 2, False),  # --json reports a check
            Case(["refresh", "--timeout", "0"], 2, False)]


def _publish(tmp: Path, make: Any, reg: Path) -> list[Case]:
    cart, registry = make(), tmp / "published"
    return [Case(["publish", cart, "--registry", registry, "--trust-registry", reg], 0, True),
            Case(["publish", cart, "--registry", registry, "--trust-registry", reg], 0, True),
            Case(["publish", cart, "--registry", tmp / "other"], 4, False)]  # untrusted


def _withdraw(tmp: Path, make: Any, reg: Path) -> list[Case]:
    registry = tmp / "ledger"
    assert main(["publish", str(make()), "--registry", str(registry),
                 "--trust-registry", str(reg)]) == 0  # the release it withdraws
    name = f"{PUBLISHER}/demo@1.0.0"
    why = "leaks the user's API token"
    return [Case(["withdraw", name, "--registry", registry, "--status", "withdrawn",
                  "--reason", why], 0, True),
            Case(["withdraw", f"{PUBLISHER}/none@1.0.0", "--registry", registry, "--status",
                  "withdrawn", "--reason", why], 1, False)]


def _push(tmp: Path, make: Any, reg: Path) -> list[Case]:
    # Its answer needs a registry: test_push_json_names_the_manifest_it_pushed.
    return [Case(["push", make(), "oci+http://127.0.0.1:9/demo"], 4, False),  # untrusted
            Case(["push", make(), "oci://h/r@sha256:" + "0" * 64, "--registry", reg], 2,
                 False)]


SCENARIOS: dict[str, Scenario] = {
    "verify --json": _verify, "inspect --json": _inspect, "ls --json": _ls,
    "status --json": _status, "list --json": _list, "trust list --json": _trust_list,
    "sync --check --json": _sync_check, "push --json": _push,
    "update --check --json": _update_check, "refresh --json": _refresh,
    "publish --json": _publish, "withdraw --json": _withdraw,
}
ANSWERED_BY_A_SLOW_TEST = {"push --json"}


def _json_commands() -> set[str]:
    """Every command of the parser that takes --json, as `PATH --json`."""
    return {f"{c.path} --json" for c in commands(build_parser()) if "--json" in c.options}


def test_every_command_with_json_is_documented_and_every_documented_one_has_it() -> None:
    shown = {" ".join(w for w in name.split() if not w.startswith("-")) + " --json"
             for name in COMMANDS}
    assert shown == _json_commands()
    table = {c.path: c.options for c in commands(build_parser())}
    for name in COMMANDS:
        words = name.split()
        path = " ".join(w for w in words if not w.startswith("-"))
        assert all(w in table[path] for w in words if w.startswith("-")), name
        assert DOCS[name], f"{name}: no field documented"
    assert [f.path for f in DOCS["error"]] == ["error", "exit"]


@pytest.mark.parametrize("command", COMMANDS)
def test_json_document_carries_the_documented_fields(command, run_cli, tmp_path, make_cartridge,
                                                     trusted_registry) -> None:
    assert command in SCENARIOS, f"docs/json.md documents {command}: give it scenarios here"
    answered = failed = 0
    depth = len([w for w in command.split() if not w.startswith("-")])  # the command's name
    for argv, code, answers in SCENARIOS[command](tmp_path, make_cartridge, trusted_registry):
        if argv[0] == "policy":  # setup: a policy file in the trust store
            Path(str(argv[1])).write_text(json.dumps(
                {"schemaVersion": "acxfs.policy/1", "publishers": [PUBLISHER],
                 "files": False, "maxIndexAgeDays": 30}))
            continue
        if argv[:2] == ["trust", "add"]:
            assert run_cli(*argv).code == 0
            continue
        words = [*argv[:depth], "--json", *argv[depth:]]  # its other options: the scenario's
        result = run_cli(*words)
        if answers:
            assert result.code == code, (words, result)
            doc = json.loads(result.out)  # one document, nothing else on stdout
            check_document(command, doc)
            if "exitCode" in doc:
                assert doc["exitCode"] == code
            answered += 1
        else:
            check_error(result, code)
            failed += 1
    assert failed, f"{command}: no failure scenario"
    assert answered or command in ANSWERED_BY_A_SLOW_TEST, f"{command}: no answer scenario"


def test_trust_list_json_names_each_key_and_the_policy(run_cli, make_cartridge,
                                                       trusted_registry, signer) -> None:
    assert run_cli("trust", "add", make_cartridge()).code == 0
    assert run_cli("trust", "add", trusted_registry).code == 0
    doc = json.loads(run_cli("trust", "list", "--json").out)
    assert [(k["kind"], k["keyid"], k["publisher"]) for k in doc["keys"]] == [
        ("pinned", signer.keyid, PUBLISHER), ("registry", signer.keyid, PUBLISHER)]
    assert doc["keys"][1]["status"] == "active" and doc["policy"] == []


def test_sync_check_json_lists_the_differences_it_prints(run_cli, tmp_path) -> None:
    (tmp_path / "acxfs.lock").write_text(json.dumps({"schema": "acxfs.lock/1",
                                                     "bundles": [LOCKED]}))
    text = run_cli("sync", "--check", "--project", tmp_path)
    doc = json.loads(run_cli("sync", "--check", "--json", "--project", tmp_path).out)
    assert (doc["matches"], doc["bundles"], doc["skills"]) == (False, 1, 1)
    assert doc["differences"] == text.out.splitlines() and len(doc["differences"]) == 4
    assert text.code == 1 and doc["differences"][0].startswith(f"{PUBLISHER}/demo 1.0.0: bundle")


def test_ls_json_gives_each_entry_its_signed_digest(run_cli, make_cartridge,
                                                    trusted_registry) -> None:
    cart = make_cartridge()
    doc = json.loads(run_cli("ls", "--json", cart, "rom/knowledge", "--registry",
                             trusted_registry).out)
    long = run_cli("ls", "-l", cart, "rom/knowledge", "--registry", trusted_registry).out
    assert [(e["path"], e["type"], e["size"], e["digest"]) for e in doc["entries"]] == [
        (line.split()[3], "file", int(line.split()[1]), line.split()[2])
        for line in long.splitlines()]


# --- the real command ------------------------------------------------------------------------


def test_real_command_answers_a_refusal_with_verify_document_and_its_code(
        make_cartridge, trusted_registry, tmp_path) -> None:
    done = acxfs("verify", "--json", _tampered(make_cartridge()), "--registry", trusted_registry)
    doc = json.loads(done.stdout)
    check_document("verify --json", doc)
    assert (done.returncode, doc["exitCode"], doc["trust"]) == (5, 5, "tampered")
    missing = acxfs("ls", "--json", tmp_path / "none.acx")
    assert json.loads(missing.stdout) == {
        "error": f"acxfs: error: {tmp_path / 'none.acx'}: no such file", "exit": 2}
    assert (missing.returncode, missing.stderr) == (2, json.loads(missing.stdout)["error"] + "\n")


@pytest.mark.fuse
def test_status_json_describes_a_live_mount(make_cartridge, trusted_registry, tmp_path) -> None:
    cart = make_cartridge()
    with mounted(cart, tmp_path / "mnt", "--registry", trusted_registry) as mount:
        done = acxfs("status", "--json")
        assert done.returncode == 0, done.stderr
        doc = json.loads(done.stdout)
        check_document("status --json", doc)
        ours = [m for m in doc["mounts"] if m["mountpoint"] == str(mount.mountpoint)]
        assert [(m["container"], m["state"]) for m in ours] == [(str(cart), "running")]
        assert ours[0]["verdict"].startswith("verified / trusted")


@pytest.mark.slow
@pytest.mark.usefixtures("local_key")
def test_push_json_names_the_manifest_it_pushed(tmp_path) -> None:
    from tests.support.oci_bundles import cartridge
    from tests.support.registry import registry

    bundle = cartridge(tmp_path)
    with registry(tmp_path) as reg:
        done = acxfs("push", "--json", bundle, reg.ref("skills/foo") + ":latest",
                     env={**os.environ, **reg.env()}, timeout=120)
        assert done.returncode == 0, done.stderr
        doc = json.loads(done.stdout)
        check_document("push --json", doc)
        assert doc["reference"] == f"{doc['repository']}@{doc['digest']}"
        assert (doc["version"], doc["tags"]) == ("1.1.0", ["1.1.0", "latest"])


def test_only_the_document_reaches_stdout_whatever_else_is_printed(capsys) -> None:
    from acxfs.cli import output

    with output.reserved(True):
        print("a note the library printed")
        output.emit({"answer": 1})
    out, err = capsys.readouterr()
    assert (json.loads(out), err) == ({"answer": 1}, "a note the library printed\n")
