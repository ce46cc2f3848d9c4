"""What the library keeps on disk and the rules its records obey: the bundle store, the
record of what is installed (`library.json`), a project's `acxfs.lock`, version floors and
publisher bindings.

Invariant: every record here is written whole and read back as untrusted input; a store file
is named by the sha256 of its bytes and checked in full before anything records it.
"""
