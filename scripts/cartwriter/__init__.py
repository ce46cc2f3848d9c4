"""The independent ACX 0.1 cartridge writer, as a package (its modules follow)."""

from scripts.cartwriter.writer import *  # noqa: F403
