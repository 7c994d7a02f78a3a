#!/usr/bin/env bash
# The release-blocking property, checked from the other side: a trace that
# lost a write (the layer's test hook drops one update packet) must FAIL
# verify, naming the submit.
. "$(dirname "$0")/common.sh"
MEMTRACK_TEST_DROP_UPDATE=7 "$MEMTRACK" record --quiet -o "$TMP/t.mtrace" --mode guard --verify -- \
  "$SAMPLE" --workload sparse --frames 5 >/dev/null 2>&1 || fail "sample failed"
if "$MEMTRACK" verify "$TMP/t.mtrace" >"$TMP/out"; then cat "$TMP/out"; fail "verify passed a trace with a lost write"; fi
grep -q "MISMATCH" "$TMP/out" || fail "verify did not name the mismatching submit"
# And a trace without hashes is not a pass either.
"$MEMTRACK" record --quiet -o "$TMP/n.mtrace" -- "$SAMPLE" --workload sparse --frames 2 >/dev/null 2>&1
if "$MEMTRACK" verify "$TMP/n.mtrace" >/dev/null; then fail "verify passed a trace without hashes"; fi
echo "lost write: detected"
