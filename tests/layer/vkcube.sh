#!/usr/bin/env bash
# vkcube (Debian's vulkan-tools) on lavapipe under Xvfb, 300 frames, with the
# Khronos validation layer under ours: it runs, validation stays silent, and
# every submit verifies byte-exact.
. "$(dirname "$0")/common.sh"
case "${MT_SANITIZE:-}" in *thread*)
  # TSan needs every module instrumented, and an instrumented layer cannot be
  # loaded into vkcube without preloading the runtime into an uninstrumented
  # program, which TSan does not support (it reports vkcube's, xcb's and
  # lavapipe's own locking). The layer's concurrency is exercised under TSan
  # by the instrumented, multi-threaded memtrack-sample (test_layer_sample).
  echo "SKIPPED under TSan: vkcube is not instrumented"; exit 77 ;;
esac
command -v vkcube >/dev/null || fail "vkcube is not installed (scripts/deps.sh installs vulkan-tools)"
command -v xvfb-run >/dev/null || fail "xvfb-run is not installed (scripts/deps.sh installs xvfb)"
for mode in auto shadow; do
  # The sanitizer runtime (sanitizer builds) goes into vkcube only, not into
  # xvfb-run and the X server.
  "$MEMTRACK" record -o "$TMP/vkcube-$mode.mtrace" --mode $mode --verify -- \
    xvfb-run -a -s "-screen 0 640x480x24" env LD_PRELOAD="$PRELOAD" vkcube --c 300 \
    >"$TMP/log" 2>&1 || { cat "$TMP/log"; fail "vkcube ($mode) failed"; }
  if grep -E "ThreadSanitizer|AddressSanitizer|runtime error" "$TMP/log"; then fail "sanitizer report ($mode)"; fi
  check_no_validation_errors "$TMP/log"
  "$MEMTRACK" info "$TMP/vkcube-$mode.mtrace" >"$TMP/info"
  grep -q "frames 300" "$TMP/info" || { cat "$TMP/info"; fail "expected 300 frames"; }
  "$MEMTRACK" verify "$TMP/vkcube-$mode.mtrace" || fail "verify failed ($mode)"
done
echo "vkcube: ok"
