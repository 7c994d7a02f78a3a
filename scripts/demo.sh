#!/usr/bin/env bash
# make demo: memtrack's main job. Records vkcube (Debian's vulkan-tools) on
# lavapipe for 300 frames through the capture layer with verification, then
# prints what the trace holds and whether it replays byte-exactly.
set -euo pipefail
build=${1:-build}
out=${MEMTRACK_DEMO_TRACE:-$build/vkcube.mtrace}
memtrack=$build/bin/memtrack

echo "== memtrack demo: capture vkcube (300 frames, lavapipe, Xvfb) =="
echo "\$ memtrack record -o $out --verify -- vkcube --c 300"
"$memtrack" record -o "$out" --verify -- xvfb-run -a -s "-screen 0 640x480x24" vkcube --c 300
echo
echo "\$ memtrack info $out --memories"
"$memtrack" info "$out" --memories
echo
echo "\$ memtrack verify $out"
"$memtrack" verify "$out"
echo
echo "More: $build/bin/memtrack-sample (the layer's test app: memtrack record -- $build/bin/memtrack-sample --workload sparse),"
echo "      $build/bin/mt-track-demo (the page tracker alone), memtrack bench --list."
