#!/usr/bin/env bash
# Install what acxfs needs on a fresh Debian-like machine (as root, or with sudo):
# FUSE (fuse, libfuse2; libfuse3-3 for the optional libfuse3 backend), attr (getfattr),
# sqlite3, then acxfs itself with its test tools.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
need=()
for pkg in fuse libfuse2 libfuse3-3 attr sqlite3; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ "${#need[@]}" -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
PYTHON="${PYTHON:-python3}"
"$PYTHON" -m pip install -q --disable-pip-version-check -e ".[test]" 2>&1 \
  | grep -v -e "Running pip as the 'root' user" -e "is ignored: it is neither" || true
if command -v pyenv >/dev/null 2>&1; then pyenv rehash >/dev/null 2>&1 || true; fi
"$PYTHON" -c "import acxfs, fuse, nacl, yaml" >/dev/null
command -v acxfs >/dev/null || { echo "setup: acxfs is not on PATH" >&2; exit 1; }
