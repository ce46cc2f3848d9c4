"""Command-line tools around acxfs (benchmarks, fuzzing, load), run from the repository root as
``python -m scripts.<name>``; their test-support code lives in ``tests.support``."""
