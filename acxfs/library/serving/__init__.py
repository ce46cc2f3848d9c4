"""The library daemon: the one FUSE mount serving every installed revision, its control
socket, its timer of source checks, and the systemd unit that starts it.

Invariant: the daemon serves only what it checked itself, and is reached only by its owner.
"""
