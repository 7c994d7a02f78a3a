#!/usr/bin/env bash
# make demo: the most useful end-to-end thing memtrack does today.
set -euo pipefail
build=${1:-build}
echo "== memtrack demo: transparent write tracking, signal vs uffd backend =="
"$build/bin/mt-track-demo"
