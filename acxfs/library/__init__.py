"""The skills library: signed bundles installed once, served by one verified daemon, linked
into every agent's skill directory.

Invariant: the library serves only bundle files it copied into its own store and checked in
full there (every byte), and links only what its daemon answered it serves.  Its state
changes atomically under one lock; a change of several steps is announced by an intent record
first, so a command killed at any step leaves the old library or the new one.
"""
