#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, then builds and runs a
# consumer with find_package(memtrack) and with pkg-config.
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
LD_LIBRARY_PATH="$tmp/prefix/lib:$tmp/prefix/lib64:${LD_LIBRARY_PATH:-}" "$tmp/consumer/consumer_shared"
"$tmp/consumer/consumer_static"
# pkg-config: the static library with its private dependencies
pcdir=$(ls -d "$tmp"/prefix/lib*/pkgconfig | head -1)
cc -o "$tmp/pc" "$src/tests/install/consumer/main.c" \
   $(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags memtrack) \
   "$(dirname "$pcdir")/libmemtrack.a" $(PKG_CONFIG_PATH="$pcdir" pkg-config --static --libs-only-l memtrack | sed 's/-lmemtrack//')
"$tmp/pc"
echo "install: ok"
