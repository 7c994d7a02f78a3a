#!/usr/bin/env bash
# vkcube (Debian's vulkan-tools) on lavapipe under Xvfb, 300 frames, with the
# Khronos validation layer under ours: it runs, validation stays silent, and
# every submit verifies byte-exact.
. "$(dirname "$0")/common.sh"
command -v vkcube >/dev/null || fail "vkcube is not installed (scripts/deps.sh installs vulkan-tools)"
command -v xvfb-run >/dev/null || fail "xvfb-run is not installed (scripts/deps.sh installs xvfb)"
for mode in auto shadow; do
  LD_PRELOAD=$PRELOAD "$MEMTRACK" record -o "$TMP/vkcube-$mode.mtrace" --mode $mode --verify -- \
    xvfb-run -a -s "-screen 0 640x480x24" vkcube --c 300 >"$TMP/log" 2>&1 || { cat "$TMP/log"; fail "vkcube ($mode) failed"; }
  check_no_validation_errors "$TMP/log"
  "$MEMTRACK" info "$TMP/vkcube-$mode.mtrace" >"$TMP/info"
  grep -q "frames 300" "$TMP/info" || { cat "$TMP/info"; fail "expected 300 frames"; }
  "$MEMTRACK" verify "$TMP/vkcube-$mode.mtrace" || fail "verify failed ($mode)"
done
echo "vkcube: ok"
