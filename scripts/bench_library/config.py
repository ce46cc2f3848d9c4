"""What a library benchmark run measures: the five columns, the measures of each N, the
run's configuration, and the shape of its results.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scripts.bench.results import Cell

LIBRARY, LIBRARY_WHOLE, MOUNTS, LINKED, COPIES = (
    "library", "library, directories whole", "per-bundle mounts", "copies behind links",
    "plain copies")
COLUMNS = (LIBRARY, LIBRARY_WHOLE, MOUNTS, LINKED, COPIES)
LIBRARIES = (LIBRARY, LIBRARY_WHOLE)  # the two layouts of the one library
NO_DAEMON = (LINKED, COPIES)
MEASURES = (  # key, label, unit
    ("install", "install all N (once)", "s"),
    ("daemons", "daemons serving", "count"),
    ("rss_up", "daemon RSS after up", "MiB"),
    ("rss_read", "daemon RSS after reading every SKILL.md", "MiB"),
    ("up", "up until every link resolves", "s"),
    ("add", "add one more bundle (full check)", "s"),
    ("read", "cold read of every SKILL.md", "s"),
)
STARTUP_AGENTS = (  # slug, name, what its start-up is timed to (scripts.bench_library.startup)
    ("claude", "Claude Code", "its first model request"),
    ("codex", "Codex", "its first model request"),
    ("gemini", "Gemini CLI", "the end of `gemini skills list`"),
    ("opencode", "OpenCode", "the end of `opencode debug skill`"),
)
STARTUP_MEASURES = tuple(  # at the largest N only
    (f"start_{slug}_{temperature}", f"{name} start-up to {until}, {temperature}", "s")
    for slug, name, until in STARTUP_AGENTS for temperature in ("cold", "warm"))


class BenchError(Exception):
    """A column could not be measured (a command failed, a mount never came up)."""


@dataclass(frozen=True)
class Config:
    sizes: tuple[int, ...]
    reps: int
    quick: bool
    timeout: float  # seconds for one command or one wait
    json_path: Path | None
    work: Path
    keep: bool
    columns: tuple[str, ...]  # slugs of the columns to run
    agents: tuple[str, ...] = ("claude", "codex", "gemini", "opencode")  # start-up, largest N


Results = dict[tuple[int, str, str], Cell]  # (N, measure, column)


@dataclass(frozen=True)
class Bundle:
    skill: str
    path: Path
    skill_md: bytes
