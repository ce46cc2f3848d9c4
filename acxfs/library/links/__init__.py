"""The library's links: the agents table, the symlinks acxfs makes in agents' skill
directories, the ownership checks on those directories, and a work tree's git exclude lines.

Invariant: the lowest part of the library; it imports no other part of it, and changes
nothing acxfs did not make.
"""
