#!/usr/bin/env bash
# Slowdown over native of memory-bound kernels (tests/check/cuda/bench_mem.cu:
# copy, saxpy, block reduction, 5-point stencil, 256 MiB arrays, 10 launches),
# natively, under memtrack check and under compute-sanitizer memcheck and
# initcheck, all in the same run (native and memtrack check interleaved,
# ROUNDS times, medians).
#
#   bench.sh MEMTRACK BENCH_BIN OUTDIR [ROUNDS]
#
# Writes OUTDIR/bench.md (table) and OUTDIR/bench.jsonl. Target: memtrack
# check's slowdown <= 1/5 of memcheck's, with identical results. Exits 77
# without a GPU. Environment: CHECK_ARGS (more options for memtrack check),
# BENCH_TOOLS=check (skip compute-sanitizer).
set -u
memtrack=$1 bench=$2 out=$3 rounds=${4:-3}
mkdir -p "$out"
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || { echo "no GPU: skipped"; exit 77; }
: > "$out/bench.raw"
for r in $(seq "$rounds"); do
    "$bench" 10 | sed "s/^/native $r /" >> "$out/bench.raw" 2>&1
    "$memtrack" check ${CHECK_ARGS:-} -- "$bench" 10 2> "$out/bench.check.$r.log" | sed "s/^/check $r /" >> "$out/bench.raw"
done
if command -v compute-sanitizer >/dev/null && [ "${BENCH_TOOLS:-all}" = all ]; then
    compute-sanitizer --tool memcheck "$bench" 10 2>&1 | sed "s/^/memcheck 1 /" >> "$out/bench.raw"
    compute-sanitizer --tool initcheck "$bench" 10 2>&1 | sed "s/^/initcheck 1 /" >> "$out/bench.raw"
fi
python3 - "$out" <<'PY'
import json, statistics, sys, collections
out = sys.argv[1]
ms = collections.defaultdict(list); ck = {}
for line in open(out + "/bench.raw"):
    f = line.split()
    if len(f) >= 10 and f[2] == "bench":
        tool, kern = f[0], f[3]
        ms[(tool, kern)].append(float(f[7])); ck[(tool, kern)] = f[9]
rows = []
md = ["| kernel (10 launches, 256 MiB) | native ms | memtrack check ms | slowdown | memcheck ms | slowdown | initcheck ms | slowdown | check / memcheck slowdown | target (<= 0.2) | results identical |",
      "|---|---|---|---|---|---|---|---|---|---|---|"]
jl = open(out + "/bench.jsonl", "w")
for k in ["copy", "saxpy", "reduce", "stencil"]:
    med = lambda t: statistics.median(ms[(t, k)]) if ms.get((t, k)) else float("nan")
    n, c, m, i = med("native"), med("check"), med("memcheck"), med("initcheck")
    sc, sm, si = c / n, m / n, i / n
    ratio = sc / sm if sm == sm else float("nan")
    same = ck.get(("check", k)) == ck.get(("native", k))
    md.append(f"| {k} | {n:.3f} | {c:.3f} | {sc:.2f}x | {m:.1f} | {sm:.1f}x | {i:.1f} | {si:.1f}x | {ratio:.3f} | {'met' if ratio <= 0.2 else ('-' if ratio != ratio else 'MISSED')} | {'yes' if same else 'NO'} |")
    for tool, v, s in [("check", c, sc), ("memcheck", m, sm), ("initcheck", i, si)]:
        jl.write(json.dumps({"suite": "check", "case": f"{k}/{tool}", "metric": "ms_10_launches", "value": v,
                             "unit": "ms", "baseline_name": "native", "baseline": n, "ratio": s,
                             "target": "slowdown <= memcheck/5" if tool == "check" else None,
                             "target_met": (1 if ratio <= 0.2 else 0) if tool == "check" else -1}) + "\n")
open(out + "/bench.md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
