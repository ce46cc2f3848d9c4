"""Projects: `acxfs add/update/remove --project` and `acxfs sync`, and where a lock's
bundles are fetched from.

Invariant: a project moves only by its own commands and its lock; nothing else rewrites
`acxfs.lock` or moves a project's links (a revoked locked release loses them).
"""
