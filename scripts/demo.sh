#!/usr/bin/env bash
# Install everything, then the main job on the bundled example skill: make a key, pack and
# sign examples/hello-acx, verify it, mount it where an agent runtime looks for skills,
# show it through the mount with ls and cat, validate it with the agentskills.io
# reference validator, and unmount.  Everything lives in a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
work="$(mktemp -d)"
export ACXFS_TRUST_DIR="$work/trust" XDG_STATE_HOME="$work/state"
mnt="$work/home/.claude/skills/hello-acx"
cleanup() { acxfs umount "$mnt" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
step() { printf '\n$ %s\n' "$*"; "$@"; }
step acxfs keygen
step acxfs pack examples/hello-acx -o "$work/hello-acx.acx" --publisher io.github.acxfs-demo
step acxfs verify "$work/hello-acx.acx"
step acxfs mount "$work/hello-acx.acx" "$mnt"
step ls -la "$mnt" "$mnt/references" "$mnt/scripts"
step cat "$mnt/SKILL.md"
step getfattr -n user.acx.oid "$mnt/SKILL.md"
step sh "$mnt/scripts/greet.sh" reader
step agentskills validate "$mnt"   # skills-ref, the agentskills.io reference validator
step touch "$mnt/new-file" || echo "(refused, as it should be: the mount is read-only)"
step acxfs umount "$mnt"
echo
echo "demo finished: packed, signed, verified, mounted, read, validated and unmounted."
