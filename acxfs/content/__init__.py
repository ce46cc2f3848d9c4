"""Content: the rule by which stored bytes become verified bytes, and the cache of verified
bytes every source reads through.

Invariant: no byte leaves this package before its sha256 matched the signed manifest.
"""
