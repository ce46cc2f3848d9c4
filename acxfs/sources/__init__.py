"""Where bundles come from besides a file the user names: ACX registries (a directory or
HTTPS), azphalt repositories and OCI registries.

Invariant: this package reads sources and says what they offer (`Release`s, unsigned), and
`oci.push` publishes a verified bundle; it installs nothing and imports nothing of
`acxfs.library`.  Every byte it hands on is bounded,
and every claim it hands on is checked by the library against the bundle's signed facts.
Its modules load one by one as a command needs them: this package's own module is empty, and
`kinds` holds the table of source kinds (which imports every client).
"""
