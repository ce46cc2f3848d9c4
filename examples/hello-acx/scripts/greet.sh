#!/bin/sh
# Print a greeting; the script itself was verified before it could be read.
echo "Hello, ${1:-world}: this script came from a verified ACX cartridge."
