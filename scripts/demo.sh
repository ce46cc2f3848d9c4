#!/usr/bin/env bash
# Install everything, then the main job on the bundled example skill: make a key, pack and
# sign examples/hello-acx, add it to the skills library in a temporary HOME (checked in full,
# served by one verified daemon, linked for every agent), show the links and read the skill
# through one, validate it with the agentskills.io reference validator, and remove it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
work="$(mktemp -d)"
export HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config" XDG_STATE_HOME="$work/home/.state"
export XDG_DATA_HOME="$work/home/.local/share"
unset ACXFS_TRUST_DIR
mkdir -p "$HOME"
cleanup() { acxfs down >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
step() { printf '\n$ %s\n' "$*"; "$@"; }
link="$HOME/.claude/skills/hello-acx"
step acxfs keygen
step acxfs pack examples/hello-acx -o "$work/hello-acx.acx" --publisher io.github.acxfs-demo
step acxfs verify "$work/hello-acx.acx"
step acxfs add "$work/hello-acx.acx"
step ls -l "$HOME/.agents/skills" "$HOME/.claude/skills"
step ls -la "$link/" "$link/references" "$link/scripts"
step cat "$link/SKILL.md"
step sh "$link/scripts/greet.sh" reader
step agentskills validate "$link"   # skills-ref, the agentskills.io reference validator
step touch "$link/new-file" || echo "(refused, as it should be: served read-only)"
step acxfs list
step acxfs remove hello-acx
step ls -la "$HOME/.claude/skills"
step acxfs down
echo
echo "demo finished: packed, signed, verified, added for every agent, read, validated, removed."
