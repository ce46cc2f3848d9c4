"""Command-line tools around acxfs (benchmarks, fuzzing, load), run from the repository root as
``python -m scripts.<name>``, and the helpers they share with the test suite (the independent
cartridge writer, real mounts, hostile inputs).

Invariant: nothing here imports ``tests``; the tests import from here. Nothing here is shipped
with acxfs (the wheel holds ``acxfs`` only).
"""
