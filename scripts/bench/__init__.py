"""Side-by-side benchmark of acxfs and its peers on the same synthetic skills.

One command builds synthetic skill directories, packs them with `acxfs pack --sqlar-dirs`
(zlib rows, directory rows and S_IFREG bits, so ratarmount can list them), zips the same
trees for fuse-zip, and measures in the same run:

    plain        the same files in a plain directory (the floor)
    sqlite3 -Ax  extraction of the same .acx, then the extracted tree
    ratarmount   the same .acx mounted with ratarmount (no verification)
    fuse-zip     a zip of the same tree mounted with fuse-zip
    nullfs       scripts/nullfs.py: a do-nothing fusepy filesystem with the same names and
                 sizes (the libfuse2 + Python floor for open, read and release), served
                 by libfuse's worker threads as acxfs is
    nullfs -s    the same, served by libfuse's single-threaded loop (-s)
    acxfs        the same .acx mounted with acxfs over libfuse2 (every byte verified; the
                 binding where libfuse3 is absent)
    acxfs libfuse3, acxfs lowlevel
                 the same through mfusepy's high-level libfuse3 API, and through acxfs's
                 own binding of libfuse3's low-level API (`acxfs mount`'s default where
                 libfuse3 loads)

Workloads (a)-(f) and `acxfs verify`; a Markdown table of medians goes to
stdout and every raw run to a JSON file.  Each cold run mounts afresh after dropping the page
cache (when root may); warm runs repeat on the same mount.  A peer that cannot run is shown
as "absent: reason", never dropped.

    python3 -m scripts.bench --quick                 # CI smoke test, under 3 minutes
    python3 -m scripts.bench --install-peers         # the full run (long: 100k-file packs)

Modules: `config` (sizes, peers), `results` (rows, cells, targets), `context` (what a run
shares), `system` (commands, mounts, page cache), `datasets` (the synthetic skills), `peers`,
`worker` (each measured operation in its own process), `measuring` (cells, cold and warm),
`floor` (in-process inflate+sha256), `workloads` (a-f, v, p), `targets`, `report` (table and
JSON), `provenance` (commit, host, byte-compiling), `__main__` (arguments and the run).
"""
