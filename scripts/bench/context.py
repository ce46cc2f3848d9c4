"""What every step of a run shares (configuration, environment, the table being filled, whether
the page cache can be dropped, the log), and the errors a measurement ends with.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from scripts.bench.config import Config
from scripts.bench.results import Table


class BenchError(Exception):
    """A measurement could not be taken (mount failed, command failed)."""


class OpTimeout(BenchError):
    """A measured operation ran past the configured timeout."""


@dataclass
class Context:
    cfg: Config
    env: dict[str, str]
    table: Table
    drop_caches: bool
    drop_note: str
    log: Callable[[str], None]
    revision: str = "unknown"
