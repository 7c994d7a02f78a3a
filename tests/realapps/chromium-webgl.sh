#!/bin/sh
# Chromium (headless) running webgl.html through ANGLE on Vulkan, for
# realapps.sh: the page's digest line goes to $1/digest.txt, Chromium's
# profile and log beside that folder; Chromium's exit status is kept. As
# root Chromium runs only without its sandbox.
chromium --headless=new --no-sandbox --user-data-dir="$1.profile" --use-angle=vulkan \
  --enable-features=Vulkan --ignore-gpu-blocklist --enable-gpu \
  --dump-dom "file://$(dirname "$0")/webgl.html" >"$1.dom" 2>"$1.chromium.log"
rc=$?
grep -o '<pre id="out">[^<]*</pre>' "$1.dom" >"$1/digest.txt"
# A page that failed (no WebGL, a GL error) would compare equal to an equally
# failed reference run: that is a failure of its own.
grep -q '>digest [0-9a-f]*<' "$1/digest.txt" || { cat "$1/digest.txt" >&2; exit 3; }
exit $rc
