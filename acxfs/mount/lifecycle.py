"""Mount lifecycle: the serving process, its start and stop, unmount.

`mount` takes one `MountPlan`: the sources to serve (each already past its verdict, each at
its path prefix), the verified-bytes cache they read through, and how to run.  It runs the
pre-flight checks (`preflight`), then (background mode) forks a child that serves in the
foreground and reports through a pipe once the kernel has the mount; the parent returns only
then, so every failure reaches the terminal with a non-zero exit.  The child unmounts on
SIGINT, SIGTERM and SIGHUP (libfuse's handlers), removes a mountpoint it created (and any
parents it had to create for it), and logs start and stop (`records`).

Invariant: a mount starts only after `preflight.check_mountpoint` accepted its mountpoint,
and a failed start leaves nothing mounted and nothing made for it.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from acxfs.content.cache import VerifiedCache
from acxfs.errors import EnvironmentProblem
from acxfs.mount import backend as fuse_backend
from acxfs.mount import invalidation
from acxfs.mount.invalidation import KernelNotifier
from acxfs.mount.operations import AcxOperations
from acxfs.mount.preflight import check_mountpoint, prepare_records_dir, remove_made
from acxfs.mount.records import (
    MountState,
    alive,
    clear_state,
    log_line,
    read_state,
    write_state,
)
from acxfs.mount.router import Mounted
from acxfs.mount.table import canonical, is_mounted, live_mounts, mount_owner

READY_TIMEOUT = 60.0


@dataclass
class MountPlan:
    """Everything one mount needs.

    `mounts`: the sources it serves, each at its prefix (a source at prefix '' is the mount's
    only one); `cache`: the process's verified-bytes cache, which every source of `mounts` reads
    through; `view`: what status calls the mount; `created`: what `prepare_mountpoint` made
    (None: the mountpoint existed); `name`: the mount's name in /proc/mounts and its state
    (default: the label of its one source, an absolute path); `fuse_options`: options that
    replace or add to the default ones (e.g. negative_timeout); `on_live`: called in the
    serving process once the mount is live, with the operations whose sources can then be
    changed."""

    mountpoint: str
    mounts: list[Mounted]
    cache: VerifiedCache
    view: str
    foreground: bool = False
    log_file: Path | None = None
    created: list[str] | None = None
    backend: str = fuse_backend.DEFAULT_BACKEND
    announce: Callable[[str], None] = field(default=lambda message: None)
    fuse_options: dict[str, int] = field(default_factory=dict)
    name: str = ""
    on_live: Callable[[AcxOperations], None] = field(default=lambda ops: None)
    note: str = ""  # what status says of it, instead of `summary`'s default
    # For a mount whose sources change: the options that replace `fuse_options` where the
    # kernel's caches cannot be invalidated (`acxfs.mount.invalidation`).
    uncached_options: dict[str, int] | None = None
    reserved: Path | None = None  # a mountpoint in acxfs's data reserved for this mount

    @property
    def title(self) -> str:
        """The mount's name: `name`, or the label of its one source."""
        if self.name or len(self.mounts) != 1:
            return self.name or "acxfs"
        return self.mounts[0].label

    @property
    def summary(self) -> str:
        """`note`, else the verdict line of its one source, or how many sources it serves."""
        if self.note:
            return self.note
        if len(self.mounts) == 1:
            return self.mounts[0].verdict.line
        return f"{len(self.mounts)} sources"


def _fsname(title: str) -> str:
    return "acxfs:" + title.replace("\\", "/").replace(",", "_")


def _return_freed_memory() -> None:
    """Serve large allocations with mmap so evicted cache entries go back to the system.

    Without this glibc's heap fragments under many concurrent verifications and the daemon's
    RSS keeps growing past the cache bound (measured by scripts/stress.py).  The threshold is
    4 MiB, not lower: the 1 MiB pieces a large file is inflated in must come from the heap,
    because a fresh mapping per piece costs a page fault per 4 KiB (with 128 KiB, a cold
    256 MiB read took twice as long; docs/performance.md)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None)
        libc.mallopt(-3, 4 * 1024 * 1024)  # M_MMAP_THRESHOLD: cached blobs come from mmap
        libc.mallopt(-8, 2)  # M_ARENA_MAX: few per-thread heaps to fragment


def _trim_heap() -> None:
    """Give the heap memory freed so far back to the system: the check's rows are freed by
    now, and the daemon (forked, or this process in the foreground) need not keep them."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


def serve(plan: MountPlan, on_ready: Callable[[], None]) -> None:
    """Run the filesystem of `plan` in this process until it is unmounted or signalled."""
    fuse_class = fuse_backend.load(plan.backend)
    _return_freed_memory()
    # The verified trees live as long as the mount: keep the collector from re-scanning them.
    gc.freeze()
    ops: AcxOperations
    kernel = KernelNotifier(plan.backend, plan.mountpoint)

    def ready() -> None:
        kernel.capture()  # in the init callback: the one place libfuse names its session
        ops.kernel = kernel
        plan.on_live(ops)  # before the caller is told: what on_live starts is there by then
        on_ready()

    ops = AcxOperations(plan.mounts, plan.cache,
                        log=lambda message: log_line(plan.log_file, message), on_ready=ready)
    fuse_options = plan.fuse_options
    if plan.uncached_options is not None and not invalidation.available(plan.backend):
        fuse_options = {**fuse_options, **plan.uncached_options}
    options: dict[str, Any] = {
        "attr_timeout": 86400, "entry_timeout": 86400, "negative_timeout": 3600,
        **fuse_backend.options(plan.backend), **fuse_options,
    }
    fuse_class(
        ops, plan.mountpoint, raw_fi=True, foreground=True, ro=True, default_permissions=True,
        fsname=_fsname(plan.title), subtype="acxfs", **options,
    )


def mount(plan: MountPlan) -> int:
    """Mount and return once live (background) or once unmounted (foreground).  When the
    mount fails, what `prepare_mountpoint` made for it is removed again."""
    try:
        # Every caller's mount, the library's own included (which reserves its `mnt`).
        check_mountpoint(plan.mountpoint, [], None, reserved=plan.reserved)
        prepare_records_dir()
        return _mount(replace(plan, mountpoint=canonical(plan.mountpoint)))
    except BaseException:
        if plan.created is not None:
            remove_made([*plan.created, os.path.abspath(plan.mountpoint)])
        raise


def _mount(plan: MountPlan) -> int:
    mountpoint, created, log_file = plan.mountpoint, plan.created, plan.log_file
    state = MountState(mountpoint, plan.title, plan.view, plan.summary,
                       os.getpid(), created is not None, str(log_file) if log_file else None,
                       created or [])
    _trim_heap()  # before a fork, so the daemon starts without that memory resident

    def cleanup() -> None:
        mine = read_state(mountpoint)
        if mine is None or mine.pid == os.getpid():  # a later mount's state is not ours
            clear_state(mountpoint)
        if created is not None:
            remove_made([*created, mountpoint])
        log_line(log_file, f"stop: {mountpoint}")

    if plan.foreground:
        def ready() -> None:
            write_state(state)
            log_line(log_file, f"start: {plan.title} on {mountpoint} ({plan.view}; "
                     f"{plan.summary})")
            plan.announce(f"mounted {plan.title} on {mountpoint} ({plan.view}); "
                          "Ctrl-C to unmount")

        try:
            serve(plan, ready)
        except RuntimeError as exc:
            # libfuse3 reports 8 when a signal (Ctrl-C, SIGTERM, SIGHUP) ended its loop: that
            # is the stop the user asked for once the mount is gone.
            if not (str(exc) == "8" and plan.backend in invalidation.LIBFUSE3
                    and not is_mounted(mountpoint)):
                raise EnvironmentProblem(f"mount failed on {mountpoint} ({exc})") from exc
        finally:
            cleanup()
        return 0
    return _mount_background(plan, state, cleanup)


def _mount_background(plan: MountPlan, state: MountState, cleanup: Callable[[], None]) -> int:
    mountpoint, log_file = plan.mountpoint, plan.log_file
    status_r, status_w = os.pipe()
    err_r, err_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the daemon
        code = 1
        reported = [False]  # once closed, status_w's number may belong to another file
        try:
            os.close(status_r)
            os.close(err_r)
            os.setsid()
            os.chdir("/")  # never keep the caller's directory busy (paths are absolute here)
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 0)
            os.dup2(err_w, 1)
            os.dup2(err_w, 2)
            state.pid = os.getpid()

            def ready() -> None:
                write_state(state)
                log_line(log_file, f"start: {plan.title} on {mountpoint} ({plan.view}; "
                         f"{plan.summary})")
                os.write(status_w, b"ok\n")
                os.dup2(devnull, 1)
                os.dup2(devnull, 2)
                os.close(status_w)
                os.close(err_w)
                reported[0] = True

            serve(plan, ready)
            code = 0
        except BaseException as exc:
            if not reported[0]:
                with contextlib.suppress(OSError):
                    os.write(status_w, f"error: {exc}\n".encode())
        finally:
            with contextlib.suppress(BaseException):
                cleanup()
            os._exit(code)
    os.close(status_w)
    os.close(err_w)
    message, errors = _wait_ready(status_r, err_r, pid)
    if message == "ok":
        deadline = time.monotonic() + 10
        while not is_mounted(mountpoint) and time.monotonic() < deadline:
            time.sleep(0.01)
        plan.announce(f"mounted {plan.title} on {mountpoint} ({plan.view}); pid {pid}; "
                      f"unmount with: acxfs umount {shlex.quote(mountpoint)}")
        return 0
    _stop_failed_daemon(pid, mountpoint)
    detail = errors.strip().splitlines()[-1] if errors.strip() else message.removeprefix("error: ")
    log_line(log_file, f"refused: mount of {plan.title} on {mountpoint} failed: {detail}")
    raise EnvironmentProblem(f"mount failed on {mountpoint}: {detail or 'the daemon exited'}")


def _stop_failed_daemon(pid: int, mountpoint: str, grace: float = 5.0) -> None:
    """After a failed start: the daemon is gone, and so is anything it mounted.

    The daemon was asked to stop (or stopped itself); one that does not exit within `grace`
    seconds is killed, so the mount command never waits forever.  A daemon mounts before it
    writes its state file, and its state names it: a mount found at `mountpoint` is undone
    only when that state is this daemon's, never when it is another live mount's."""
    deadline = time.monotonic() + grace
    try:
        while os.waitpid(pid, os.WNOHANG)[0] == 0:
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                break
            time.sleep(0.02)
    except ChildProcessError:
        pass
    state = read_state(mountpoint)
    if state is not None and state.pid != pid and alive(state.pid):
        return  # the mount there is another, live acxfs mount's (two mounts raced): keep it
    if state is not None:
        clear_state(mountpoint)  # ours: a daemon killed before its own clean-up leaves it
    if state is not None and is_mounted(mountpoint):
        _detach(mountpoint, lazy_only=True)


def _wait_ready(status_r: int, err_r: int, pid: int) -> tuple[str, str]:
    """Read the child's status line and anything it printed, until ready or it exits."""
    status, errors = b"", b""
    open_fds = {status_r, err_r}
    deadline = time.monotonic() + READY_TIMEOUT
    while status_r in open_fds and time.monotonic() < deadline:
        readable, _, _ = select.select(list(open_fds), [], [], 0.5)
        for fd in readable:
            chunk = os.read(fd, 65536)
            if not chunk:
                open_fds.discard(fd)
                os.close(fd)
            elif fd == status_r:
                status += chunk
                if status.endswith(b"\n"):
                    open_fds.discard(fd)
                    os.close(fd)
            else:
                errors += chunk
    for fd in open_fds:
        if fd == err_r and status.startswith(b"error"):
            with contextlib.suppress(OSError):
                errors += os.read(fd, 65536)
        os.close(fd)
    if not status:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
        return "error: the daemon did not become ready", errors.decode(errors="replace")
    return status.decode(errors="replace").strip(), errors.decode(errors="replace")


def umount(mountpoint: str, timeout: float = 15.0) -> str:
    """Unmount an acxfs mount (live or stale), wait for its daemon, remove what acxfs made."""
    state = read_state(mountpoint)
    if not is_mounted(mountpoint):
        if state is not None:
            clear_state(mountpoint)
        raise EnvironmentProblem(f"{mountpoint} is not mounted")
    if not any(canonical(mountpoint) == mp for _, mp in live_mounts()):
        raise EnvironmentProblem(f"{mountpoint} is not an acxfs mount")
    owner = mount_owner(mountpoint)
    if os.geteuid() != 0 and owner is not None and owner != os.geteuid():
        raise EnvironmentProblem(f"{mountpoint} was mounted by another user (uid {owner}); "
                                 "only that user or root can unmount it")
    lazy, problem = _detach(mountpoint)
    if problem is not None:
        raise EnvironmentProblem(f"cannot unmount {mountpoint}: {problem}")
    if lazy:  # detached lazily: files still open keep the daemon
        timeout = min(timeout, 1.0)
    lingering = ""
    if state is not None:
        deadline = time.monotonic() + timeout
        while alive(state.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        if state.created_mountpoint:
            remove_made([*state.created_parents, mountpoint])
        clear_state(mountpoint)
        if alive(state.pid):
            lingering = (f" (detached while files were open: daemon {state.pid} serves them "
                         "until they are closed, then exits)")
    return f"unmounted {mountpoint}{lingering}"


def _detach(mountpoint: str, lazy_only: bool = False) -> tuple[bool, str | None]:
    """Unmount with fusermount (plainly, then lazily) or, as root, `umount -l`.  Returns
    (whether it took a lazy detach, the last tool's complaint if nothing worked)."""
    tool = shutil.which("fusermount") or shutil.which("fusermount3")
    commands = ([] if lazy_only else [[tool, "-u", mountpoint]]) if tool else []
    commands += [[tool, "-uz", mountpoint]] if tool else []
    if os.geteuid() == 0:
        commands.append(["umount", "-l", mountpoint])
    last = "no fusermount, and umount -l needs root"
    for command in commands:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode == 0 and not is_mounted(mountpoint):
            return command[1] in ("-uz", "-l"), None
        last = (done.stderr or done.stdout).strip() or "unknown error"
    return False, last
