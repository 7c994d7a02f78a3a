#!/usr/bin/env bash
# scripts/fuzz.sh [BUILD_DIR] [SECONDS]: builds the libFuzzer targets with
# clang (ASan+UBSan, coverage-instrumented library) into BUILD_DIR and runs
# each target for SECONDS, starting from the committed corpus in fuzz/corpus/.
# New inputs go to BUILD_DIR/corpus-<target>/, crashes to BUILD_DIR/ (a crash
# fails the script; add the reproducer to fuzz/corpus/<target>/ once fixed).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-fuzz}
secs=${2:-60}
jobs=${MT_FUZZ_JOBS:-2}

cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DMT_FUZZ=ON -DMT_SANITIZE=address,undefined -DMT_BUILD_TESTS=OFF -DMT_BUILD_TOOLS=OFF \
      -DMT_BUILD_LAYER=OFF >/dev/null
targets=(trace_reader diff)
cmake --build "$build" -j"$jobs" --target "${targets[@]/#/fuzz_}"

for t in "${targets[@]}"; do
  work="$build/corpus-$t"
  mkdir -p "$work"
  echo "::: fuzz_$t for ${secs}s"
  "$build/bin/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$build/crash-$t-" -print_final_stats=1 "$work" "fuzz/corpus/$t"
done
echo "::: fuzzing passed"
