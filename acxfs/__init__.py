"""acxfs: mount signed skill bundles read-only; no byte is served before its sha256 matched."""

__version__ = "0.1.0"
