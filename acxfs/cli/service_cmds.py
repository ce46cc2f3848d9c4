"""`acxfs service install` and `acxfs service remove`: the library daemon as a systemd user
service, so the library is back after a reboot.

Invariant: each command makes one call into `acxfs.library.serving.service` and prints what it did
and what the user runs next; nothing here writes a file itself.
"""

from __future__ import annotations

import argparse
import shlex

from acxfs.cli.common import SubParsers, add_command
from acxfs.errors import EnvironmentProblem
from acxfs.library.serving import service
from acxfs.text import printable


def add_commands(subs: SubParsers) -> None:
    p = add_command(subs, "service", "run the library daemon as a systemd user service "
                    "(the library comes back after a reboot)",
                    "acxfs service install\n  acxfs service remove", cmd_service_help)
    actions = p.add_subparsers(dest="service_command", metavar="ACTION")
    add_command(actions, "install", "write the systemd user unit acxfs.service that runs "
                "acxfs up -f, and say how to enable it",
                "acxfs service install\n"
                f"  {service.ENABLE_COMMAND}", cmd_service_install)
    add_command(actions, "remove", "delete the unit acxfs service install wrote (never "
                "another one)", f"{service.DISABLE_COMMAND}\n  acxfs service remove",
                cmd_service_remove)


def cmd_service_help(args: argparse.Namespace) -> int:
    raise EnvironmentProblem("service needs an action: install or remove")


def cmd_service_install(args: argparse.Namespace) -> int:
    done = service.install()
    verb = {"written": "wrote", "replaced": "updated", "unchanged": "unchanged:"}[done.outcome]
    print(printable(f"{verb} {done.path}"))
    print(printable(f"  ExecStart={shlex.join(done.exec_start)}"))
    if service.systemd_running():
        print(f"to start the library now and at every login: {service.ENABLE_COMMAND}")
        print("to start it at boot, before you log in: loginctl enable-linger")
    else:
        print(f"systemd is not running here (no {service.SYSTEMD_RUNNING_MARKER}): the unit "
              "cannot be enabled on this machine")
        print(printable("to start the library at login instead, add this line to ~/.profile: "
                        f"{service.profile_line(done.exec_start[0])}"))
    return 0


def cmd_service_remove(args: argparse.Namespace) -> int:
    removed = service.remove()
    if removed is None:
        print(printable(f"no acxfs unit at {service.unit_path()}: nothing to remove"))
        return 0
    print(printable(f"removed {removed}"))
    if service.systemd_running():
        print("to forget it in the running user manager: systemctl --user daemon-reload")
    return 0
