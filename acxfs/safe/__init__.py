"""Safe filesystem primitives: directories, new files, links and inputs, every one relative
to open directory descriptors; the one rule of whose directories acxfs may write in
(`ownership`); JSON read with one meaning per document, and acxfs's own files read as the
untrusted input they are (`own_files`).

Invariant: acxfs never replaces, follows or writes into anything it did not make.
"""
