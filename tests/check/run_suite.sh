#!/usr/bin/env bash
# The planted-bug suite on a GPU: every program of tests/check/cuda under
# memtrack check, compute-sanitizer memcheck and initcheck, and natively.
#
#   run_suite.sh MEMTRACK BINDIR OUTDIR
#
# MEMTRACK: the memtrack binary (libmemtrack_check.so found next to it).
# BINDIR: the programs, built with PTX embedded; when it holds none and nvcc
# is there, they are built into it. Writes OUTDIR/suite.md (the table),
# OUTDIR/suite.tsv and one log per program and tool. Exits 0 when memtrack
# check detects every planted bug and reports nothing on the programs that
# must stay quiet, 1 otherwise, 77 without a GPU (or without nvcc and
# prebuilt programs). Environment: CHECK_ARGS (more options for memtrack
# check), SUITE_TOOLS=check (skip compute-sanitizer and the native runs).
set -u
here=$(cd "$(dirname "$0")" && pwd)
memtrack=$1 bindir=$2 out=$3
mkdir -p "$out" "$bindir"
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || { echo "no GPU: skipped"; exit 77; }
if ! ls "$bindir"/bug_* >/dev/null 2>&1; then
    command -v nvcc >/dev/null || { echo "no nvcc and no prebuilt programs: skipped"; exit 77; }
    for src in "$here"/cuda/bug_*.cu "$here"/cuda/ok_*.cu; do
        p=$(basename "$src" .cu)
        libs=
        case $p in *nvrtc*) libs="-lnvrtc -lcuda" ;; esac # run-time compilation, driver API
        nvcc -O3 -lineinfo -gencode arch=compute_90,code='[sm_90,compute_90]' -o "$bindir/$p" "$src" $libs &
    done
    wait
fi
have_cs=0
command -v compute-sanitizer >/dev/null && [ "${SUITE_TOOLS:-all}" = all ] && have_cs=1

errors_of() { # memtrack check's summary line
    sed -n 's/^memtrack check: \([0-9]*\) failed check.*/\1/p' "$1" | tail -1
}
cs_errors_of() {
    sed -n 's/^========= ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$1" | head -1 # not "N errors were not printed"
}
sync_of() { sed -n 's/^[a-z_0-9]*: sync: \(.*\)/\1/p' "$1" | head -1; }
ctx_of() { sed -n 's/^[a-z_0-9]*: context afterwards: \(.*\)/\1/p' "$1" | head -1; }

run_one() {
    local p=$1
    [ "${SUITE_TOOLS:-all}" = all ] && timeout 120 "$bindir/$p" > "$out/$p.native.log" 2>&1
    timeout 300 "$memtrack" check --error-exitcode 0 ${CHECK_ARGS:-} -- "$bindir/$p" > "$out/$p.check.log" 2>&1
    if [ $have_cs = 1 ]; then
        timeout 300 compute-sanitizer --tool memcheck "$bindir/$p" > "$out/$p.memcheck.log" 2>&1
        timeout 300 compute-sanitizer --tool initcheck "$bindir/$p" > "$out/$p.initcheck.log" 2>&1
    fi
}
progs=$(cd "$bindir" && ls bug_* ok_* 2>/dev/null | grep -v '\.' )
for p in $progs; do run_one "$p" & done
wait

fail=0
{
    echo "| program | must | memtrack check | sync returned | context after | memcheck | initcheck | native sync |"
    echo "|---|---|---|---|---|---|---|---|"
} > "$out/suite.md"
printf "program\tmust\tcheck\tmemcheck\tinitcheck\n" > "$out/suite.tsv"
for p in $progs; do
    case $p in
        ok_*|bug_prefetch_slack) must=quiet ;;
        *) must=report ;;
    esac
    e=$(errors_of "$out/$p.check.log"); e=${e:-?}
    m=-; i=-
    if [ $have_cs = 1 ]; then
        m=$(cs_errors_of "$out/$p.memcheck.log"); m=${m:-?}
        i=$(cs_errors_of "$out/$p.initcheck.log"); i=${i:-?}
    fi
    verdict() { # errors, must
        if [ "$1" = "?" ] || [ "$1" = "-" ]; then echo "$1";
        elif [ "$2" = report ]; then [ "$1" -gt 0 ] && echo "detected ($1)" || echo "MISSED";
        else [ "$1" -eq 0 ] && echo "quiet" || echo "FALSE REPORT ($1)"; fi
    }
    ve=$(verdict "$e" $must)
    case $ve in detected*|quiet) ;; *) fail=1 ;; esac
    echo "| $p | $must | $ve | $(sync_of "$out/$p.check.log") | $(ctx_of "$out/$p.check.log") | $(verdict "$m" $must) | $(verdict "$i" $must) | $(sync_of "$out/$p.native.log") |" >> "$out/suite.md"
    printf "%s\t%s\t%s\t%s\t%s\n" "$p" "$must" "$e" "$m" "$i" >> "$out/suite.tsv"
done
cat "$out/suite.md"
exit $fail
