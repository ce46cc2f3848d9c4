"""Signing: Ed25519 keys in the standards' encodings, DSSE envelopes, RFC 8785 canonical JSON.

Invariant: a payload leaves this package as verified only after its signature verified.
"""
