"""Who owns what in the library: each identity's publisher and key, each skill name.

Invariant: an identity belongs to the signed publisher (and key) that first installed it; a
bundle of that identity signed for another publisher is refused, and one signed by another
key of the same publisher only with `--allow-key-change`; the binding outlives `remove` like
the floor and goes only with `--forget`.  After every change each skill name is offered by
one identity's served revision (a revision's served path is its own: `served_names`).  Every
check here only reads; a refusal is a `RefusedError` raised before the change's first step.
"""

from __future__ import annotations

from acxfs.errors import KeyChangeError, RefusedError
from acxfs.library.store.state import Binding, LibraryState, Revision


def binding_of(state: LibraryState, identity: str) -> Binding | None:
    """The publisher and key `identity` is bound to (for a library written before bindings
    were kept: those of its served revision)."""
    binding = state.bindings.get(identity)
    item = state.installed.get(identity)
    if binding is None and item is not None:
        binding = Binding(item.current.publisher, item.current.keyid, item.current.installed_at)
    return binding


def check_publisher(rev: Revision, state: LibraryState, allow_key_change: bool) -> None:
    """RefusedError when `rev` is signed for another publisher than the one its identity is
    bound to, or (without `allow_key_change`) by another key of that publisher."""
    binding = binding_of(state, rev.identity)
    if binding is None:
        return
    how = "is" if rev.identity in state.installed else "was"
    if rev.publisher != binding.publisher:
        raise KeyChangeError(
            f"{rev.identity} {how} installed from publisher {binding.publisher}; this file is "
            f"signed for {rev.publisher}" + _forget_hint(how, rev.identity))
    if rev.keyid != binding.keyid and not allow_key_change:
        raise KeyChangeError(
            f"{rev.identity} {how} installed from publisher {binding.publisher} with the key "
            f"{binding.keyid}; this file is signed by another key ({rev.keyid}); "
            "--allow-key-change to accept the new key")


def _forget_hint(how: str, identity: str) -> str:
    return "" if how == "is" else f" (acxfs remove --forget {identity} forgets the first)"


def bound(rev: Revision, binding: Binding | None) -> Binding:
    """The binding after `rev` (checked) is installed: the new key once it was accepted."""
    if binding is not None and (binding.publisher, binding.keyid) == (rev.publisher, rev.keyid):
        return binding
    return Binding(rev.publisher, rev.keyid, rev.installed_at)


def check_skills(before: LibraryState, after: LibraryState) -> None:
    """RefusedError when, after a change, a skill name a changed identity offers is offered
    by another identity too (a `revert` bringing back a name another bundle took since)."""
    for identity, item in sorted(after.installed.items()):
        old = before.installed.get(identity)
        if old is not None and old.current == item.current:
            continue
        for skill in sorted(item.current.skills):
            owner = next((other for other, theirs in sorted(after.installed.items())
                          if other != identity and skill in theirs.current.skills), None)
            if owner is not None:
                raise RefusedError(
                    f"{identity} {item.current.version}: skill {skill!r} is offered by {owner} "
                    "now; two bundles cannot serve one skill name")
