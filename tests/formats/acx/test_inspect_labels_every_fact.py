"""inspect: a summary from rows alone, every fact labelled by what verified it."""

from __future__ import annotations

import json
import sqlite3

from tests.support import REAL

REGISTRY = REAL / "scenario-research-designer.registry.json"
CART = REAL / "scenario-research-designer.acx"


def test_inspect_marks_signed_facts_and_labels_the_index(run_cli) -> None:
    result = run_cli("inspect", CART, "--registry", REGISTRY)
    assert result.code == 0
    signed, unsigned = result.out.split("unsigned metadata")
    assert "cartridge facts, signed (verified):" in signed
    assert "acx.publisher_id: io.github.agentibus" in signed
    assert "acx.vec0_format" in unsigned and "acx.vec0_format" not in signed
    assert "index data from acx_skill" in result.out
    assert "rom/skills/expertise-designer/SKILL.md" in result.out


def test_inspect_of_a_portable_cartridge_says_the_signer_is_not_trusted(run_cli) -> None:
    result = run_cli("inspect", REAL / "rex-calder-1.0.0.acx")
    assert result.code == 0
    assert "signed (intact, signer not trusted)" in result.out


def test_inspect_inflates_nothing(run_cli, make_cartridge, trusted_registry) -> None:
    cart = make_cartridge()
    conn = sqlite3.connect(cart)
    conn.execute("UPDATE sqlar SET data = randomblob(length(data))")
    conn.commit()
    conn.close()
    result = run_cli("inspect", cart, "--json", "--registry", trusted_registry)
    assert result.code == 0
    doc = json.loads(result.out)
    assert doc["verdict"].startswith("verified / trusted")
    assert doc["rom"]["files"] == 4
    assert [s["name"] for s in doc["skillIndex"]] == ["demo-skill"]


def test_inspect_of_a_tampered_cartridge_shows_no_signed_facts(run_cli, make_cartridge) -> None:
    cart = make_cartridge()
    conn = sqlite3.connect(cart)
    conn.execute("UPDATE cartridge SET value='evil' WHERE key='acx.publisher_id'")
    conn.commit()
    conn.close()
    result = run_cli("inspect", cart)
    assert result.code == 5
    assert result.out.startswith("invalid / tampered")
    assert "signed (verified)" not in result.out
