#!/usr/bin/env bash
# Coherence on a GPU machine in one command: the coherence benchmark with
# its upload variants (--json), the CUDA coherence test, the same test
# under compute-sanitizer (memcheck) when it is installed, and the
# application-threads test with two devices on the GPU; then a summary.
# Each step has its own time limit so the whole run stays under 100 s on an
# H100 (the bench takes about a minute there); a step that runs out is
# reported as such and the next one still runs.
#
#   scripts/gpu-coherence.sh BUILD_DIR [OUT_DIR]
# OUT_DIR (default: a temporary folder) keeps bench.json and the logs.
# Environment: BENCH_LIMIT, TEST_LIMIT, SANITIZER_LIMIT, THREADS_LIMIT
# (seconds; defaults 60, 10, 25, 30).
set -uo pipefail
BUILD=$(cd "${1:?usage: $0 BUILD_DIR [OUT_DIR]}" && pwd)
OUT=${2:-$(mktemp -d)}
mkdir -p "$OUT"
MEMTRACK=$BUILD/bin/memtrack
TEST=$BUILD/bin/test_coherence_cuda
start=$(date +%s)

step() { # name limit command...: runs it, logs to OUT/name.log, returns its status
  local name=$1 limit=$2
  shift 2
  local t0 rc
  t0=$(date +%s%N)
  timeout -k 5 "$limit" "$@" >"$OUT/$name.log" 2>&1
  rc=$?
  printf '%-18s rc=%-3s %6d ms%s\n' "$name" "$rc" "$((($(date +%s%N) - t0) / 1000000))" \
    "$([ "$rc" = 124 ] && echo "  (ran past ${limit} s)")" >>"$OUT/steps.txt"
  return $rc
}

: >"$OUT/steps.txt"
command -v nvidia-smi >/dev/null &&
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$OUT/gpu.txt" 2>&1

# The JSON lines go to bench.json, the rest (notes, errors) to bench.log.
MT_BENCH_COH_VARIANTS=1 step bench "${BENCH_LIMIT:-60}" \
  sh -c '"$1" bench coherence --json >"$2/bench.json"' sh "$MEMTRACK" "$OUT"
step test "${TEST_LIMIT:-10}" "$TEST"
test_rc=$?
if command -v compute-sanitizer >/dev/null; then
  step sanitizer "${SANITIZER_LIMIT:-25}" compute-sanitizer --tool memcheck \
    --error-exitcode 3 "$TEST"
else
  echo "compute-sanitizer: not installed" >"$OUT/sanitizer.log"
fi
MT_COH_TEST_CUDA=1 step threads "${THREADS_LIMIT:-30}" "$BUILD/bin/test_coherence_threads"
threads_rc=$?

echo "== gpu-coherence: $(cat "$OUT/gpu.txt" 2>/dev/null || echo 'no nvidia-smi')"
cat "$OUT/steps.txt"
echo "-- test_coherence_cuda (rc $test_rc; 77 = skipped: no GPU):"
tail -n 5 "$OUT/test.log"
echo "-- test_coherence_threads with the GPU (rc $threads_rc):"
tail -n 2 "$OUT/threads.log"
if [ -f "$OUT/sanitizer.log" ]; then
  echo "-- compute-sanitizer:"
  grep -E "ERROR SUMMARY|not installed|Program hit" "$OUT/sanitizer.log" | sort | uniq -c | head -n 8
fi
echo "-- bench coherence (value, baseline, ratio, target):"
if command -v python3 >/dev/null; then
  python3 - "$OUT/bench.json" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    base = r.get("baseline")
    met = r.get("target_met")
    print("%-26s %-20s %12.4g %-4s %12s %8s %s" % (
        r["case"], r["metric"], r["value"], r.get("unit", ""),
        "%.4g" % base if base is not None else "-",
        "%.3f" % r["ratio"] if r.get("ratio") is not None else "-",
        "%s [%s]" % (r["target"], "met" if met else "MISSED") if r.get("target") else ""))
EOF
else
  cat "$OUT/bench.json"
fi
grep -h "skipped\|failed" "$OUT/bench.log" 2>/dev/null
echo "total $(($(date +%s) - start)) s; files in $OUT"
