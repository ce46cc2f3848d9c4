"""oras-py as a command, so that it is timed as a fresh process like `acxfs` and `curl`:

    python3 -m scripts.bench_oci.oras_peer push HOST HOST/REPO:TAG FILE
    python3 -m scripts.bench_oci.oras_peer pull HOST HOST/REPO:TAG OUTDIR

Invariant: plain http to HOST only (`insecure=True`); a push uploads FILE as the one layer
(oras-py's own manifest and config), a pull writes the artifact's titled layers into OUTDIR.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import oras.client


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[0] not in ("push", "pull"):
        print(__doc__, file=sys.stderr)
        return 2
    action, host, target, path = argv
    client = oras.client.OrasClient(hostname=host, insecure=True)
    if action == "push":
        os.chdir(Path(path).parent)  # oras-py titles the layer with the path it is given
        answer = client.push(files=[Path(path).name], target=target, disable_path_validation=True)
        return 0 if answer.status_code in (200, 201) else 1
    files = client.pull(target=target, outdir=path)
    return 0 if files and all(Path(f).is_file() for f in files) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
