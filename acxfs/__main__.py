"""`python -m acxfs`: the same as the `acxfs` command."""

from acxfs.cli import main_entry

main_entry()
