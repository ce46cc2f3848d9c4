"""Safe filesystem primitives: directories, new files, links and inputs, every one relative
to open directory descriptors, and JSON read with one meaning per document.

Invariant: acxfs never replaces, follows or writes into anything it did not make.
"""
