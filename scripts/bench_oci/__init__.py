"""OCI registries side by side in one run: signed cartridges of a few sizes published to and
fetched from a real `docker-registry` (the CNCF distribution registry) on loopback, plain http.

    push            `acxfs push FILE oci+http://...` (full check of the bundle, then upload)
                    vs oras-py's `OrasClient.push` of the same file
    fetch/install   `acxfs add oci+http://...:TAG` into a fresh HOME with the publisher's key
                    pinned (resolve, download, full check, store, daemon start, links), with
                    `acxfs add FILE` of the same cartridge from disk as its baseline, vs
                    oras-py's `OrasClient.pull` of the same artifact (download only) and vs
                    `curl` of its layer blob

Every peer runs as a fresh process, as a user would run it. Rounds are interleaved (each round
runs every size and every command, in an order rotated per round) and each cell is the median
of the rounds. One Markdown table goes to stdout, progress to stderr.

Invariant: nothing outside one temporary directory is touched, and on any exit (failure,
Ctrl-C, SIGTERM) every `acxfs add` has been followed by `acxfs down` in its HOME, every daemon
started under the directory is stopped, the registry is stopped by its pid and the directory
removed.

    python3 -m scripts.bench_oci --quick          # 30-40 s
    python3 -m scripts.bench_oci --rounds 7

Modules: `registry` (the registry's config, start and stop), `steps` (the cartridges and each
timed command), `oras_peer` (oras-py as a command), `__main__` (arguments, rounds, the table).
"""
