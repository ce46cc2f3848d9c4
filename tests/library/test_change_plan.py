"""The library's change planner (`acxfs.library.changes.plan`), without a file touched:
which links an install, an update, a revert, a suspension and a resumption make, re-point
and remove, which store files the change frees, how the floor moves, and that the state
before is never changed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from acxfs.errors import RefusedError
from acxfs.library.changes.plan import Plan, target
from acxfs.library.links.agent_links import Link
from acxfs.library.store.state import Floor, Installed, LibraryState, Places, Revision

MNT = Path("/lib/mnt")
AGENTS = Path("/home/u/.agents/skills")
CLAUDE = Path("/home/u/.claude/skills")
ID = "io.github.me/research"


def rev(version: str, skills: tuple[str, ...] = ("alpha", "beta"), *, digest: str = "",
        manifest: str = "", identity: str = ID) -> Revision:
    digest = digest or (version.replace(".", "") * 64)[:64]
    return Revision(
        digest=digest, file=f"{digest}.acx", format="acx", identity=identity, version=version,
        manifest=manifest or f"sha256:m{version}", keyid="ed25519:k", publisher="io.github.me",
        skills={s: f"rom/skills/{s}" for s in skills},
        installed_at=f"2026-01-0{version[0]}T00:00:00Z",
    )


def links_of(r: Revision, directories: list[Path], skills: tuple[str, ...]) -> list[Link]:
    return [Link(str(d), s, str(MNT / r.prefix / s)) for d in directories for s in skills]


def installed(current: Revision, previous: Revision | None = None,
              directories: tuple[Path, ...] = (AGENTS, CLAUDE)) -> LibraryState:
    state = LibraryState("/trust")
    state.installed[ID] = Installed(current, previous, [str(d) for d in directories],
                                    links_of(current, list(directories), tuple(current.skills)))
    state.floors[ID] = Floor(current.version, current.manifest, current.installed_at)
    return state


def test_a_link_target_is_the_revisions_immutable_path() -> None:
    one = rev("1.0.0", digest="ab" * 32)
    publisher, artifact = ID.split("/")
    assert target(MNT, one, "alpha") == f"/lib/mnt/{publisher}+{artifact}@1.0.0-abababababab/alpha"


def test_a_first_install_makes_one_link_per_skill_and_directory_and_sets_the_floor() -> None:
    plan = Plan.of(LibraryState("/trust"))
    one = rev("1.0.0")
    plan.install(one, [AGENTS, CLAUDE], MNT)
    assert plan.make == links_of(one, [AGENTS, CLAUDE], ("alpha", "beta"))
    assert plan.repoint == [] and plan.remove == []
    item = plan.after.installed[ID]
    assert (item.current, item.previous) == (one, None)
    assert item.directories == [str(AGENTS), str(CLAUDE)] and item.links == plan.make
    assert plan.after.floors[ID] == Floor("1.0.0", one.manifest, one.installed_at)


def test_an_update_repoints_kept_skills_removes_dropped_and_links_new_ones() -> None:
    one, two = rev("1.0.0", ("alpha", "beta")), rev("2.0.0", ("beta", "gamma"))
    plan = Plan.of(installed(one))
    plan.install(two, [AGENTS], MNT)  # the directories of the identity stay the recorded ones
    old_beta = links_of(one, [AGENTS, CLAUDE], ("beta",))
    assert plan.repoint == [(old, Link(old.directory, "beta", target(MNT, two, "beta")))
                            for old in old_beta]
    assert plan.remove == links_of(one, [AGENTS, CLAUDE], ("alpha",))
    assert plan.make == links_of(two, [AGENTS, CLAUDE], ("gamma",))
    item = plan.after.installed[ID]
    assert (item.current, item.previous) == (two, one)
    assert sorted((link.directory, link.name, link.target) for link in item.links) == sorted(
        (link.directory, link.name, link.target)
        for link in links_of(two, [AGENTS, CLAUDE], ("beta", "gamma")))
    assert plan.after.floors[ID].version == "2.0.0"


def test_a_plan_never_changes_the_state_it_was_made_from() -> None:
    one = rev("1.0.0")
    before = installed(one)
    text = before.to_json()
    plan = Plan.of(before)
    plan.install(rev("2.0.0", ("gamma",)), [AGENTS], MNT)
    plan.suspend(ID)
    assert before.to_json() == text
    assert plan.before is before and plan.after.to_json() != text


def test_an_update_drops_the_revision_before_the_previous_one_from_the_store() -> None:
    one, two, three = rev("1.0.0"), rev("2.0.0"), rev("3.0.0")
    plan = Plan.of(installed(two, one))
    plan.install(three, [AGENTS], MNT)
    intent = plan.intent("update", MNT)
    assert intent.delete_files == [one.file]
    assert plan.after.installed[ID].revisions() == [three, two]
    assert json.loads(intent.state)["installed"][ID]["previous"]["version"] == "2.0.0"


def test_installing_a_lower_version_with_allow_downgrade_keeps_the_floor() -> None:
    two, one = rev("2.0.0"), rev("1.0.0")
    plan = Plan.of(installed(two))
    plan.install(one, [AGENTS], MNT)
    assert plan.after.floors[ID] == Floor("2.0.0", two.manifest, two.installed_at)
    assert plan.after.installed[ID].current == one


def test_a_revert_serves_the_previous_revision_and_keeps_the_current_one() -> None:
    one, two = rev("1.0.0", ("alpha",)), rev("2.0.0", ("alpha", "beta"))
    plan = Plan.of(installed(two, one))
    plan.revert(ID, MNT)
    item = plan.after.installed[ID]
    assert (item.current, item.previous) == (one, two)
    assert [new for _, new in plan.repoint] == links_of(one, [AGENTS, CLAUDE], ("alpha",))
    assert plan.remove == links_of(two, [AGENTS, CLAUDE], ("beta",))
    assert plan.make == []
    assert plan.after.floors[ID].version == "2.0.0"  # a revert never lowers the floor
    assert plan.intent("revert", MNT).delete_files == []


def test_a_revert_without_a_previous_revision_is_refused() -> None:
    plan = Plan.of(installed(rev("1.0.0")))
    with pytest.raises(RefusedError, match="no previous revision"):
        plan.revert(ID, MNT)
    assert (plan.make, plan.repoint, plan.remove) == ([], [], [])


def test_a_suspended_identity_loses_its_links_and_a_resumed_one_gets_them_back() -> None:
    one = rev("1.0.0")
    plan = Plan.of(installed(one))
    plan.suspend(ID)
    assert plan.remove == links_of(one, [AGENTS, CLAUDE], ("alpha", "beta"))
    item = plan.after.installed[ID]
    assert item.suspended and item.links == []
    again = Plan.of(plan.after)
    again.resume(ID, MNT)
    assert again.make == links_of(one, [AGENTS, CLAUDE], ("alpha", "beta"))
    assert not again.after.installed[ID].suspended
    assert again.after.installed[ID].links == again.make


def test_the_intent_holds_every_step_and_the_state_to_commit() -> None:
    one = rev("1.0.0")
    plan = Plan.of(LibraryState("/trust"))
    plan.install(one, [AGENTS], MNT)
    intent = plan.intent("add", MNT)
    assert intent.op == "add" and intent.make == plan.make and intent.delete_files == []
    places = Places(str(MNT), frozenset({str(AGENTS), str(CLAUDE)}))  # what the state may name
    read = LibraryState.from_json(intent.state, Path("x"), places)
    assert read.installed[ID].current == one


def test_two_identities_are_planned_independently() -> None:
    other = rev("1.0.0", ("delta",), identity="io.github.you/other", digest="cd" * 32)
    plan = Plan.of(installed(rev("1.0.0")))
    plan.install(other, [CLAUDE], MNT)
    assert plan.make == [Link(str(CLAUDE), "delta", target(MNT, other, "delta"))]
    assert plan.after.installed[ID] == plan.before.installed[ID]
    assert set(plan.after.floors) == {ID, "io.github.you/other"}
