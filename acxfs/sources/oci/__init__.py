"""OCI registries as a channel for signed bundles: push, and releases for the library.

Invariant: the registry is transport, never trust.  A tag finds a manifest, a lock records
its digest; a manifest is accepted only in the one form acxfs writes, a blob only with the
size and sha256 its manifest names, and the bundle inside then gets the full check like any
other.  `reference` parses names, `login` answers a registry's 401, `repository` is the
distribution API, `artifact` the manifests, `push` publishes, `source` offers releases.
"""
