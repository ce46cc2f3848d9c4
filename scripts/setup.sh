#!/usr/bin/env bash
# Install what acxfs needs on a fresh Debian-like machine (as root, or with sudo):
# FUSE (fuse, libfuse2; libfuse3-3 for the optional libfuse3 backend), attr (getfattr),
# sqlite3, systemd (systemd-analyze verifies the service unit), util-linux (unshare),
# iproute2 and git (projects: the exclude file, the tests' clones), zsh (the completion
# tests), docker-registry and apache2-utils (the OCI tests' registry), then acxfs itself with
# its test tools.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
need=()
for pkg in fuse libfuse2 libfuse3-3 attr sqlite3 systemd util-linux iproute2 git zsh; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ "${#need[@]}" -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
# The OCI tests (tests/support/registry.py) start the CNCF distribution registry themselves
# (Debian's docker-registry, `docker-registry serve CONFIG`) and make htpasswd files with
# apache2-utils. The package's service must never be enabled or started: a systemd preset
# disables it and a policy-rc.d (ours only when none exists, removed again) refuses every
# invoke-rc.d start; should it run anyway, it is stopped.
oci_need=()
for pkg in docker-registry apache2-utils; do
  dpkg -s "$pkg" >/dev/null 2>&1 || oci_need+=("$pkg")
done
if [ "${#oci_need[@]}" -gt 0 ]; then
  PRESET=/etc/systemd/system-preset/00-acxfs-docker-registry.preset
  $SUDO mkdir -p "$(dirname "$PRESET")"
  echo "disable docker-registry.service" | $SUDO tee "$PRESET" >/dev/null
  POLICY=/usr/sbin/policy-rc.d
  OUR_POLICY=0
  if [ ! -e "$POLICY" ]; then
    OUR_POLICY=1
    trap '$SUDO rm -f "$POLICY"' EXIT
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$POLICY" >/dev/null
    $SUDO chmod 755 "$POLICY"
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${oci_need[@]}" >/dev/null
  if [ "$OUR_POLICY" -eq 1 ]; then
    $SUDO rm -f "$POLICY"
    trap - EXIT
  fi
fi
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet docker-registry 2>/dev/null
then
  $SUDO systemctl disable --now docker-registry >/dev/null 2>&1 || true
fi
# (by the service's own pid file: a test's registry is none of its business)
if [ -x /etc/init.d/docker-registry ] && $SUDO /etc/init.d/docker-registry status >/dev/null 2>&1
then
  $SUDO /etc/init.d/docker-registry stop >/dev/null 2>&1 || true
fi
PYTHON="${PYTHON:-python3}"
"$PYTHON" -m pip install -q --disable-pip-version-check -e ".[test]" 2>&1 \
  | grep -v -e "Running pip as the 'root' user" -e "is ignored: it is neither" || true
if command -v pyenv >/dev/null 2>&1; then pyenv rehash >/dev/null 2>&1 || true; fi
"$PYTHON" -c "import acxfs, fuse, nacl, yaml" >/dev/null
command -v acxfs >/dev/null || { echo "setup: acxfs is not on PATH" >&2; exit 1; }
# The real agents the tests and the library benchmark run (scripts/agent_runs/): headless
# against loopback mocks of their model APIs (Claude Code, Codex), or (tests/support/agents.py)
# their own skill listings (Gemini CLI, OpenCode, GitHub Copilot CLI). The npm packages pinned
# by tests/agents/package.json and its lock file, installed with `npm ci` under
# $ACXFS_AGENTS_DIR (default: ~/.cache/acxfs-agents of the user in the password database);
# skipped when that lock is already installed there. Needs Node.js >= 20 (Gemini CLI's floor).
AGENTS_DIR="${ACXFS_AGENTS_DIR:-$(getent passwd "$(id -un)" | cut -d: -f6)/.cache/acxfs-agents}"
AGENT_BINS=(.bin/claude .bin/codex .bin/gemini .bin/copilot)
# OpenCode is pinned as its linux-x64 build (tests/agents/package.json): npm skips it elsewhere
if [ "$(uname -sm)" = "Linux x86_64" ]; then AGENT_BINS+=(opencode-linux-x64/bin/opencode); fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  node_pkgs=()
  command -v node >/dev/null 2>&1 || node_pkgs+=(nodejs)
  command -v npm >/dev/null 2>&1 || node_pkgs+=(npm)
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${node_pkgs[@]}" >/dev/null
fi
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' \
  || { echo "setup: Node.js $(node --version) is too old for the test agents (>= 20)" >&2; exit 1; }
installed=1
cmp -s tests/agents/package-lock.json "$AGENTS_DIR/.installed-lock.json" || installed=0
for bin in "${AGENT_BINS[@]}"; do
  [ -x "$AGENTS_DIR/node_modules/$bin" ] || installed=0
done
if [ "$installed" -eq 0 ]; then
  # copilot-cache: where the tests let Copilot CLI unpack itself (COPILOT_PKG_CACHE_HOME)
  rm -rf "$AGENTS_DIR/node_modules" "$AGENTS_DIR/.installed-lock.json" "$AGENTS_DIR/copilot-cache"
  mkdir -p "$AGENTS_DIR"
  cp tests/agents/package.json tests/agents/package-lock.json "$AGENTS_DIR/"
  if ! (cd "$AGENTS_DIR" && npm ci --no-audit --no-fund --loglevel=error >npm-ci.log 2>&1); then
    cat "$AGENTS_DIR/npm-ci.log" >&2
    echo "setup: npm ci of the test agents failed in $AGENTS_DIR" >&2
    exit 1
  fi
  # Each binary runs once (in a scratch HOME; Copilot CLI unpacks itself where the tests expect)
  for bin in "${AGENT_BINS[@]}"; do
    if ! COPILOT_PKG_CACHE_HOME="$AGENTS_DIR/copilot-cache" COPILOT_AUTO_UPDATE=false \
         HOME="$AGENTS_DIR/smoke-home" "$AGENTS_DIR/node_modules/$bin" --version >/dev/null; then
      echo "setup: $AGENTS_DIR/node_modules/$bin --version failed" >&2
      exit 1
    fi
  done
  rm -rf "$AGENTS_DIR/smoke-home"
  cp tests/agents/package-lock.json "$AGENTS_DIR/.installed-lock.json"
fi
