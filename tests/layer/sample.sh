#!/usr/bin/env bash
# memtrack-sample, every workload in every capture mode, with the validation
# layer under ours: the sample's own GPU check passes (the GPU saw what the
# app wrote, and the app sees what the GPU wrote) and verify passes.
. "$(dirname "$0")/common.sh"
frames=${FRAMES:-12}
# SAMPLE_WORKLOADS narrows the workloads (test_layer_sample_wc).
for w in ${SAMPLE_WORKLOADS:-sparse dense mixed many-small churn}; do
  for m in auto guard shadow scan copy; do
    out=$TMP/$w-$m.mtrace
    # Three capture threads whatever the machine: the parallel capture runs
    # under the sanitizers too.
    MEMTRACK_CAPTURE_THREADS=3 "$MEMTRACK" record --quiet -o "$out" --mode $m --verify -- \
      "$SAMPLE" --workload $w --frames $frames --threads 3 >"$TMP/log" 2>&1 || { cat "$TMP/log"; fail "$w/$m: sample failed"; }
    check_no_validation_errors "$TMP/log"
    if grep -E "ThreadSanitizer|AddressSanitizer|runtime error" "$TMP/log"; then fail "$w/$m: sanitizer report"; fi
    "$MEMTRACK" verify "$out" >"$TMP/verify" || { cat "$TMP/verify"; fail "$w/$m: verify failed"; }
    "$MEMTRACK" info "$out" | grep -q "submits      $frames," || fail "$w/$m: expected $frames submits"
    echo "  $w/$m: ok"
  done
done
echo "sample: ok"
