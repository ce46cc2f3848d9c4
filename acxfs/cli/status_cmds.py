"""`acxfs status`: the live acxfs mounts, each with its container, view, daemon and verdict.

Invariant: it reads the mount table and the mounts' records, never a container, and prints
every name a user chose (a mountpoint, a container's path) through `printable`.  It has a
module of its own so that it loads none of the mount stack that `mount` and `umount` use.
"""

from __future__ import annotations

import argparse

from acxfs.cli.common import SubParsers, add_command
from acxfs.cli.output import emit
from acxfs.mount import records
from acxfs.mount.table import live_mounts
from acxfs.text import printable


def add_commands(subs: SubParsers) -> None:
    p = add_command(subs, "status", "list live acxfs mounts with their container, view and "
                    "verdict", "acxfs status\n  acxfs status --json", cmd_status)
    p.add_argument("--json", action="store_true", help="print the mounts as JSON (docs/json.md)")


def _mount_json(fsname: str, mountpoint: str) -> dict[str, object]:
    state = records.read_state(mountpoint)
    if state is None:
        return {"mountpoint": mountpoint, "container": fsname.removeprefix("acxfs:"),
                "state": "unknown", "view": None, "pid": None, "verdict": None}
    return {"mountpoint": mountpoint, "container": state.container,
            "state": "running" if records.alive(state.pid) else "stale",
            "view": state.view, "pid": state.pid, "verdict": state.verdict}


def cmd_status(args: argparse.Namespace) -> int:
    mounts = live_mounts()
    if args.json:
        emit({"mounts": [_mount_json(fsname, mountpoint) for fsname, mountpoint in mounts]})
        return 0
    if not mounts:
        print("no acxfs mounts")
        return 0
    for fsname, mountpoint in mounts:  # names any user chose: printed with escapes
        state = records.read_state(mountpoint)
        shown = printable(mountpoint)
        container = printable(fsname.removeprefix("acxfs:"))
        if state is None:
            print(f"{shown}  {container}  (no state: started by another user or stale)")
            continue
        alive = "running" if records.alive(state.pid) else "STALE (daemon gone; acxfs umount)"
        print(f"{shown}  {printable(state.container)}  view={state.view}  pid={state.pid} "
              f"{alive}")
        print(f"  {printable(state.verdict)}")
    return 0
