#!/usr/bin/env bash
# memtrack dump gives the content the GPU saw at submit N: the sample saves
# its model of arena 0 (memory 1 in the trace) at frame 5, before submit 5.
. "$(dirname "$0")/common.sh"
for m in guard shadow; do
  "$MEMTRACK" record --quiet -o "$TMP/t.mtrace" --mode $m -- \
    "$SAMPLE" --workload many-small --frames 8 --save-frame 5 "$TMP/expected" >/dev/null 2>&1 || fail "sample failed"
  "$MEMTRACK" dump "$TMP/t.mtrace" --submit 5 --memory 1 -o "$TMP/got" 2>/dev/null || fail "dump failed"
  cmp "$TMP/expected" "$TMP/got" || fail "$m: dumped memory differs from what the app wrote"
  # The content at submit 4 is different (frame 5 wrote more).
  "$MEMTRACK" dump "$TMP/t.mtrace" --submit 4 --memory 1 -o "$TMP/got4" 2>/dev/null
  if cmp -s "$TMP/expected" "$TMP/got4"; then fail "$m: submit 4 should differ from submit 5"; fi
  # An object: the first buffer of arena 1 (memory ids and object ids share
  # one space; find a buffer id from the trace's records via dump errors).
  "$MEMTRACK" dump "$TMP/t.mtrace" --submit 5 --memory 999 -o "$TMP/x" 2>/dev/null && fail "unknown memory accepted"
  echo "  dump ($m): ok"
done
# auto's bulk state (dense memory written whole without a diff, the
# reference stale between probes): replay still gives what the app wrote,
# inside bulk (frame 12) and after a probe (frame 30); with --verify (bulk
# through the reference) verify passes.
for f in 12 30; do
  "$MEMTRACK" record --quiet -o "$TMP/b.mtrace" --mode auto -- \
    "$SAMPLE" --workload dense --frames 40 --save-frame $f "$TMP/expected" >/dev/null 2>&1 || fail "bulk: sample failed"
  "$MEMTRACK" info "$TMP/b.mtrace" --memories | grep -q "scan (auto, bulk)" || fail "bulk: never entered"
  "$MEMTRACK" dump "$TMP/b.mtrace" --submit $f --memory 1 -o "$TMP/got" 2>/dev/null || fail "bulk: dump failed"
  cmp "$TMP/expected" "$TMP/got" || fail "bulk: dumped memory differs at submit $f"
done
"$MEMTRACK" record --quiet -o "$TMP/b.mtrace" --mode auto --verify -- \
  "$SAMPLE" --workload dense --frames 40 >/dev/null 2>&1 || fail "bulk: sample failed (verify)"
"$MEMTRACK" verify "$TMP/b.mtrace" >/dev/null || fail "bulk: verify failed"
echo "  dump (auto, bulk): ok"
# Heirs: memories allocated, written whole and freed every frame; later ones
# start where the earlier ones' history led (scan, then bulk), not in guard,
# and once bulk memories are seen to live one capture, in copy.
"$MEMTRACK" record --quiet -o "$TMP/c.mtrace" --mode auto --verify -- \
  "$SAMPLE" --workload churn --frames 20 >/dev/null 2>&1 || fail "churn: sample failed"
"$MEMTRACK" verify "$TMP/c.mtrace" >/dev/null || fail "churn: verify failed"
"$MEMTRACK" info "$TMP/c.mtrace" --memories | awk '$2 == 4194304' >"$TMP/c.modes"
[ "$(wc -l <"$TMP/c.modes")" -eq 40 ] || fail "churn: expected 40 memories of 4 MiB"
grep -q "scan (auto, bulk)" "$TMP/c.modes" || { cat "$TMP/c.modes"; fail "churn: no memory reached bulk"; }
tail -10 "$TMP/c.modes" | grep -qv "copy (auto)\$" && { cat "$TMP/c.modes"; fail "churn: the last memories do not start in copy"; }
echo "  heirs (auto, churn): ok"
# A memory like the short-lived ones before it that stays: it leaves copy
# for scan in bulk (its reference filled by a copy) and still verifies.
"$MEMTRACK" record --quiet -o "$TMP/k.mtrace" --mode auto --verify -- \
  "$SAMPLE" --workload churn --frames 30 --churn-keep 18 >/dev/null 2>&1 || fail "churn-keep: sample failed"
"$MEMTRACK" verify "$TMP/k.mtrace" >/dev/null || fail "churn-keep: verify failed"
"$MEMTRACK" info "$TMP/k.mtrace" --memories >"$TMP/k.modes"
grep -q "copy (auto), scan (auto, bulk): lives longer" "$TMP/k.modes" ||
  { cat "$TMP/k.modes"; fail "churn-keep: the kept memory did not leave copy"; }
echo "  heirs (auto, churn, a memory kept): ok"
echo "dump: ok"
