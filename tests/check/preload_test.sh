#!/usr/bin/env bash
# libmemtrack_check.so end to end without a GPU: `memtrack check` runs
# fake_app against the fake driver (fake_cuda.c). Checks the interposition
# paths (dlsym, cuGetProcAddress, per-thread entry points), red zones, module
# and library (fatbinary) instrumentation and the JIT fallback, the report and
# the exit status, and four threads allocating, copying, freeing and loading
# at once.
#   preload_test.sh BUILD_DIR
# A sanitizer runtime cannot start under a preloaded, instrumented
# interposer (it looks up its own functions through the dlsym we replace):
# sanitizer builds run the same program with the hooks linked in instead.
set -u
build=$1
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$build/tests/fakecuda"
if [ -n "${MT_SANITIZE:-}" ]; then
    out=$(MEMTRACK_CHECK_RESULT=/dev/null "$build/bin/mt_check_fake_app_linked" "$here/fatbin/ok_saxpy.nv_fatbin" 2>&1)
    rc=$?
    [ $rc -eq 0 ] && rc=1 # what memtrack check would make of it: checks failed
else
    out=$("$build/bin/memtrack" check -- "$build/bin/mt_check_fake_app" "$here/fatbin/ok_saxpy.nv_fatbin" 2>&1)
    rc=$?
fi
echo "$out"
fail=0
expect() {
    if ! grep -qF -- "$1" <<<"$out"; then echo "preload_test: missing: $1"; fail=1; fi
}
expect "fake_app: ok"
expect "memtrack check: out-of-bounds global write of 4 bytes at"
expect "in k, block (0,0,0), thread (7,0,0)"
expect "at PTX line 10: st.global.u32 [%rd1+4096], %r1"
expect "address is 0 bytes after the end of a 4096-byte allocation"
expect "the access was not performed (redirected to a sink)"
expect "the JIT rejected the instrumented PTX (error 218): fake ptxas: rejected"
expect "memtrack check: 1 failed check (1 reported, 0 repeats folded); 18 modules instrumented (20 accesses checked), 1 not instrumented, 0 memory instructions not checked; 1 launches"
[ $rc -eq 1 ] || { echo "preload_test: exit status $rc, expected 1 (checks failed, app succeeded)"; fail=1; }
exit $fail
