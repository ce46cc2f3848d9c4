"""The mount stack: FUSE operations over verified sources, the backend that runs them, the
kernel's mount table, and the lifecycle of one mount (pre-flight, serve, record, unmount).

Invariant: this package serves only what a format handed over as a verified source; it never
imports the library (the library passes what its mount needs, such as its reserved `mnt`).
"""
