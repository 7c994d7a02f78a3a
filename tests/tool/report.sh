#!/usr/bin/env bash
# memtrack report on a real trace (vkcube on lavapipe under Xvfb, else
# memtrack-sample), rendered in headless Chromium: the page needs nothing
# from the network, its script runs without error and draws every chart,
# and its screenshot is not blank. Also: the report's errors, its silence
# in a pipe, and info/verify --json for scripts. Skips (77) without Chromium.
. "$(dirname "$0")/../layer/common.sh"
here=$(cd "$(dirname "$0")" && pwd)
CHROME=$(command -v chromium || command -v chromium-browser || true)

# A trace with frames, auto mode's decisions and content hashes. (Not vkcube
# under TSan: an instrumented layer cannot be loaded into it, see
# tests/layer/vkcube.sh.)
if command -v vkcube >/dev/null && command -v xvfb-run >/dev/null && [[ ${MT_SANITIZE:-} != *thread* ]]; then
  "$MEMTRACK" record --quiet -o "$TMP/t.mtrace" --verify -- \
    xvfb-run -a -s "-screen 0 640x480x24" env LD_PRELOAD="$PRELOAD" vkcube --c 120 >"$TMP/log" 2>&1 ||
    { cat "$TMP/log"; fail "vkcube failed"; }
else
  "$MEMTRACK" record --quiet -o "$TMP/t.mtrace" --verify -- "$SAMPLE" --workload sparse --frames 30 \
    >"$TMP/log" 2>&1 || { cat "$TMP/log"; fail "memtrack-sample failed"; }
fi

# Scripts: info --json and verify --json are JSON.
"$MEMTRACK" info "$TMP/t.mtrace" --json --memories >"$TMP/info.json" || fail "info --json"
python3 -m json.tool "$TMP/info.json" >/dev/null || { cat "$TMP/info.json"; fail "info --json is not JSON"; }
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["submits"] > 0 and d["memory_list"], d' \
  "$TMP/info.json" || fail "info --json holds no submits or memories"
"$MEMTRACK" verify "$TMP/t.mtrace" --json >"$TMP/verify.json" || fail "verify --json: the trace does not verify"
python3 -m json.tool "$TMP/verify.json" >/dev/null || fail "verify --json is not JSON"

# The report; stderr is a file here, so no progress line may appear.
"$MEMTRACK" report "$TMP/t.mtrace" -o "$TMP/r.html" 2>"$TMP/e" || { cat "$TMP/e"; fail "report failed"; }
grep -q $'\r' "$TMP/e" && fail "report drew progress into a pipe"
grep -q "r.html" "$TMP/e" || fail "report did not say where it wrote"
size=$(stat -c %s "$TMP/r.html")
[ "$size" -lt 4000000 ] || fail "report of a small trace is $size bytes"
# Self-contained: no external script, stylesheet, image or fetch.
if grep -Eio '<(script|link|img|iframe)[^>]* (src|href)=|@import|url\(|fetch\(|XMLHttpRequest' "$TMP/r.html"; then
  fail "the report loads something from outside the file"
fi
# Errors name the file and what to do.
head -c 3000 /dev/urandom >"$TMP/junk"
set +e; "$MEMTRACK" report "$TMP/junk" -o "$TMP/j.html" 2>"$TMP/e"; rc=$?; set -e
[ $rc -eq 1 ] && grep -q "junk" "$TMP/e" && grep -q "memtrack info" "$TMP/e" || { cat "$TMP/e"; fail "report on junk: rc=$rc"; }
set +e; "$MEMTRACK" report "$TMP/t.mtrace" -o "$TMP/no/dir/r.html" 2>"$TMP/e"; rc=$?; set -e
[ $rc -eq 1 ] && grep -q "no/dir/r.html" "$TMP/e" && grep -q -- "-o" "$TMP/e" || { cat "$TMP/e"; fail "report to a missing directory: rc=$rc"; }

[ -n "$CHROME" ] || { echo "SKIPPED: chromium is not installed (scripts/deps.sh installs it)"; exit 77; }
# Chromium wants a writable home and, as root, no sandbox; it runs offline.
chrome() {
  HOME=$TMP timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$TMP/profile" --no-first-run --disable-extensions --mute-audio "$@" 2>>"$TMP/chrome.log"
}
chrome --dump-dom "file://$TMP/r.html" >"$TMP/dom.html" || { tail "$TMP/chrome.log"; fail "chromium --dump-dom"; }
grep -q 'data-rendered="1"' "$TMP/dom.html" || fail "the report's script did not finish (a JavaScript error?)"
for id in chart-submits chart-heatmap chart-modes chart-chunks; do
  grep -q "id=\"$id\"" "$TMP/dom.html" || fail "no $id chart in the rendered page"
done
rects=$(grep -o '<rect' "$TMP/dom.html" | wc -l)
[ "$rects" -ge 50 ] || fail "the charts hold only $rects rectangles"
grep -q 'page-heatmap' "$TMP/dom.html" || fail "no page heatmap"
chrome --window-size=1280,2000 --screenshot="$TMP/shot.png" "file://$TMP/r.html" >/dev/null ||
  { tail "$TMP/chrome.log"; fail "chromium --screenshot"; }
read -r dims colours colourful < <(python3 "$here/png_stats.py" "$TMP/shot.png")
echo "screenshot $dims: $colours colours, $colourful% colourful pixels"
[ "$colours" -ge 50 ] || fail "the screenshot has $colours colours: blank?"
awk -v c="$colourful" 'BEGIN { exit !(c >= 1.0) }' || fail "the screenshot is $colourful% colourful: no charts drawn?"
[ -z "${REPORT_SHOT:-}" ] || cp "$TMP/shot.png" "$REPORT_SHOT"
echo "report: ok"
