"""`acxfs up` reports every link changed by hand, each in its own words, and leaves it alone:
in one `up`, a link deleted (missing), one re-pointed elsewhere (changed), one replaced by a
plain directory (changed), and every link of an agent directory that was removed (missing),
next to links left as acxfs made them (not reported).

Through the real `acxfs` command. `up` looks at every link of the library, each agent directory
opened once for all of its links; this proves that reading them together tells each link's
state as looking at it alone did.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from scripts.mounting import acxfs
from tests.support.library import home, ok, pack

pytestmark = [pytest.mark.fuse, pytest.mark.slow, pytest.mark.usefixtures("library_stops",
                                                                          "local_key")]

SKILLS = ("kept-skill", "deleted-skill", "repointed-skill", "replaced-skill")


def test_up_reports_each_link_changed_by_hand_and_leaves_it_alone(tmp_path: Path) -> None:
    for skill in SKILLS:
        (tmp_path / "src" / skill).mkdir(parents=True)
        (tmp_path / "src" / skill / "SKILL.md").write_text(
            f"---\nname: {skill}\ndescription: Reported or not.\n---\n\n# {skill}\n")
        ok(acxfs("add", pack(tmp_path / "src" / skill, tmp_path / f"{skill}.acx")))
    claude, agents = home() / ".claude" / "skills", home() / ".agents" / "skills"
    os.unlink(claude / "deleted-skill")
    os.unlink(claude / "repointed-skill")
    os.symlink(tmp_path / "src" / "repointed-skill", claude / "repointed-skill")
    os.unlink(claude / "replaced-skill")
    (claude / "replaced-skill").mkdir()
    shutil.rmtree(agents)
    ok(acxfs("down"))
    result = acxfs("up")
    assert result.returncode == 0, result.stderr
    notes = {line for line in result.stderr.splitlines() if "changed by hand" in line}
    assert notes == {
        f"acxfs: note: link {claude / 'deleted-skill'} is missing (changed by hand: left as it "
        "is)",
        f"acxfs: note: link {claude / 'repointed-skill'} is changed (changed by hand: left as "
        "it is)",
        f"acxfs: note: link {claude / 'replaced-skill'} is changed (changed by hand: left as "
        "it is)",
        *(f"acxfs: note: link {agents / skill} is missing (changed by hand: left as it is)"
          for skill in SKILLS),
    }, result.stderr
    assert "Traceback" not in result.stderr
    assert (claude / "kept-skill" / "SKILL.md").read_text().startswith("---\nname: kept-skill")
    assert os.readlink(claude / "repointed-skill") == str(tmp_path / "src" / "repointed-skill")
    assert (claude / "replaced-skill").is_dir() and not (claude / "replaced-skill").is_symlink()
    assert not (claude / "deleted-skill").exists() and not agents.exists()
