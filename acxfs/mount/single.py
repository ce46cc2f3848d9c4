"""`acxfs mount` as an operation: one container opened, checked, viewed and mounted.

`mount_container` opens the container through the format table (refused unless its verdict
meets the request's minimum trust), asks `acxfs.views` which subtree to serve, tells the
caller what the user should know about that choice and the verdict (through `say`), and
hands one `MountPlan` to `acxfs.mount.lifecycle`.

Invariant: the mount is made only of a source whose verdict met `min_trust`, after the
pre-flight checks accepted its mountpoint and side files; a refusal leaves nothing mounted,
made or open.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from acxfs import formats, views
from acxfs import verdict as v
from acxfs.container import Source
from acxfs.content.cache import process_cache
from acxfs.errors import UntrustedError
from acxfs.mount import backend as fuse_backend
from acxfs.mount import lifecycle, preflight, records
from acxfs.mount.router import Mounted
from acxfs.paths import default_log_file
from acxfs.trust.policy import TrustContext

# Sources handed to a daemon: kept referenced so the command exits without freeing the
# verified tree object by object (see acxfs.cli.main_entry).
_RETAINED: list[Source] = []


@dataclass(frozen=True)
class MountRequest:
    """What `acxfs mount` was asked: the container, where, which view, how to run."""

    container: str
    mountpoint: str
    min_trust: v.MinTrust = "verified"
    skill: str | None = None
    skills: bool = False
    root_view: bool = False
    with_save: bool = False
    foreground: bool = False
    backend: str = fuse_backend.DEFAULT_BACKEND
    log_file: str | None = None  # None: the default log file
    inputs: list[str] = field(default_factory=list)  # every other file the command reads


def mount_container(request: MountRequest, load_trust: Callable[[], TrustContext],
                    say: Callable[[str], None]) -> int:
    """Mount `request.container` read-only; returns once live (background) or unmounted.
    The trust store is read (`load_trust`) only once the mountpoint and side files passed."""
    # Absolute paths: the background daemon leaves the caller's directory (chdir "/").
    container = os.path.abspath(request.container)
    explicit = request.log_file is not None
    log_file = Path(request.log_file).absolute() if request.log_file else default_log_file()
    preflight.check_side_files(request.mountpoint, [container, *request.inputs], log_file,
                               "--log-file" if explicit else "the log file")
    cache = process_cache()
    try:
        source, report = formats.open_source(container, load_trust(), cache,
                                             min_trust=request.min_trust,
                                             with_save=request.with_save)
        verdict = report.verdict
        del report  # the check's rows go with it, before the daemon forks
    except UntrustedError as exc:
        records.log_line(log_file, f"refused: {request.container}: {exc.verdict}")
        raise
    try:
        view = views.choose_view(source, request.container, request.mountpoint,
                                 skill=request.skill, skills=request.skills,
                                 root_view=request.root_view)
        for note in view.notes:
            say(note)
        if verdict.status != "verified":
            warning = f"acxfs: warning: mounting below the default trust: {verdict.line}"
            if verdict.trust == "legacy" or verdict.unverified:
                warning += (" (each file is checked against its recorded digest: this catches "
                            "corruption, not tampering)")
            say(warning)
        name = view.name
        if request.with_save and name == "container":
            name = "container with the unsigned save/"
            say("acxfs: warning: save/ is the unsigned SAVE zone; files without a recorded "
                "digest there cannot be read")
        elif request.with_save:
            say(f"acxfs: note: --with-save has no effect on the {name} view (save/ lies "
                "outside it)")
        created = preflight.prepare_mountpoint(request.mountpoint, request.backend)
    except BaseException:
        source.close()
        raise
    plan = lifecycle.MountPlan(
        request.mountpoint, [Mounted("", source, view.root, verdict, container)], cache, name,
        foreground=request.foreground, log_file=log_file, created=created,
        backend=request.backend, announce=say)
    code = lifecycle.mount(plan)
    _RETAINED.append(source)  # the daemon has its own copy now
    return code
