"""The demo cartridge the tests build: its publisher, files, capability and memory.

One skill (``demo-skill`` with ``references/`` and ``scripts/``) and one knowledge file, all in
the signed ROM zone; ``conftest.make_cartridge`` builds it with ``cartwriter``, and tests compare
what acxfs serves against these bytes.
"""

from __future__ import annotations

from scripts import cartwriter as cw

PUBLISHER = "io.github.example"

SKILL_MD = b"""---
name: demo-skill
description: A small demo skill used by the acxfs tests. Use it when testing acxfs.
license: Apache-2.0
metadata:
  version: 1.0.0
---

# Demo skill

Read `references/guide.md`, then run `scripts/run.sh`.
"""

DEMO_FILES: dict[str, bytes] = {
    "rom/skills/demo-skill/SKILL.md": SKILL_MD,
    "rom/skills/demo-skill/references/guide.md": b"# Guide\n\nStep one: read. Step two: run.\n",
    "rom/skills/demo-skill/scripts/run.sh": b"#!/bin/sh\necho 'demo skill ran'\n",
    "rom/knowledge/NOTES.md": b"# Notes\n\nThese notes are signed ROM content.\n",
}
DEMO_CAPABILITIES: dict[str, str] = {
    "cap-demo": cw.jcs(
        {
            "id": "cap-demo",
            "schemaVersion": "acx.capability/1",
            "taskType": "implement-feature",
            "stack": ["pkg:generic/demo"],
        }
    ).decode(),
}
DEMO_MEMORIES: dict[str, str] = {
    "m1": cw.jcs({"id": "m1", "title": "demo memory", "zone": "rom"}).decode(),
}
