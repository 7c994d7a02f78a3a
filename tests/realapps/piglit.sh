#!/usr/bin/env bash
# Piglit's OpenGL tests through Mesa's zink (OpenGL on Vulkan) on lavapipe,
# under `memtrack record`: programs nobody here wrote, each a few hundred
# lines exercising one corner of how an OpenGL driver moves memory (buffer
# storage mapped persistent and coherent, unsynchronised and invalidating
# maps, pixel buffers, transform feedback and query results read back,
# shader storage written by compute shaders). zink turns every one of them
# into mapped Vulkan memory, copies and submits.
#
# Each test of piglit-tests.txt runs once without the layer, then in every
# capture mode with the default backend and in the tracking modes with the
# signal backend: its verdict (piglit's "result" line) must be the same,
# `record` must exit as the test did, and `memtrack verify` must pass (or
# find nothing mapped to check: exit 4). A test whose verdict differs, a
# crash or hang under the layer, or a lost write fails.
#
# Environment: PIGLIT_MODES, PIGLIT_SIGNAL_MODES and PIGLIT_TESTS (a file)
# narrow the matrix.
set -euo pipefail
BUILD=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
MEMTRACK=$BUILD/bin/memtrack
PIGLIT=${PIGLIT_DIR:-/usr/lib/x86_64-linux-gnu/piglit}
case "${MT_SANITIZE:-}" in
  *thread*|*address*)
    echo "SKIPPED under sanitizers: piglit and Mesa are not instrumented"; exit 77 ;;
esac
[ -x "$PIGLIT/bin/shader_runner" ] || { echo "FAIL: piglit is not installed (scripts/deps.sh installs it)" >&2; exit 1; }
command -v xvfb-run >/dev/null || { echo "FAIL: xvfb-run is not installed" >&2; exit 1; }

# One X server for every run (starting one per run costs a second each).
if [ -z "${PIGLIT_UNDER_XVFB:-}" ]; then
  PIGLIT_UNDER_XVFB=1 exec xvfb-run -a -s "-screen 0 640x480x24" "$0" "$@"
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export XDG_RUNTIME_DIR=$TMP/xdg
mkdir -m 700 "$XDG_RUNTIME_DIR"
# zink takes lavapipe only when software rendering is asked for.
export LIBGL_ALWAYS_SOFTWARE=1 MESA_LOADER_DRIVER_OVERRIDE=zink
modes=${PIGLIT_MODES:-auto guard shadow scan copy}
signal_modes=${PIGLIT_SIGNAL_MODES-auto guard shadow}
runs=
for m in $modes; do runs="$runs $m:auto"; done
for m in $signal_modes; do runs="$runs $m:signal"; done
failures=0
bad() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

verdict() { sed -n 's/^PIGLIT: {"result": "\([a-z]*\)" *}$/\1/p' "$1" | tail -1; }

# Whether a run that died after its verdict (log $1) died of Mesa's exit
# race: its abort ("pure virtual method called"), a hang (timeout's 124), or
# a fault the layer reports outside its own code. A fault the layer reports
# in memtrack's own objects is never taken for it.
mesa_exit_race() {
  local report
  report=$(grep -m1 "^memtrack: the process dies of " "$1" || true)
  if [ -n "$report" ]; then
    ! grep -Eq "in (libmemtrack|VkLayer_memtrack)[^ ]*\+0x" <<<"$report"
    return
  fi
  [ $RC -eq 124 ] || grep -q "pure virtual method called" "$1" || [ $RC -eq 139 ] || [ $RC -eq 134 ]
}

# Runs test $1 (its command line, a program of piglit's bin/ or a
# .shader_test under piglit's tests/) with its log in $2, under whatever
# command precedes it in "$@" after the two. Sets RC. Mesa of Debian 12
# sometimes crashes or hangs at exit after a test printed its verdict
# (LLVM compiling on a zink thread while the process exits: "pure virtual
# method called"), with or without memtrack, and Xvfb now and then refuses a
# connection; such a run is run again, twice at most, and said.
run_test() {
  local cmd=$1 log=$2 fbo=-fbo
  shift 2
  # "window TEST": drawn into an X window instead of an offscreen
  # framebuffer (on Xvfb, which has no DRI3, zink reads each frame back from
  # the device into host memory for the X server: no Vulkan swapchain).
  case $cmd in window\ *) cmd=${cmd#window } fbo= ;; esac
  local prog=${cmd%% *} args=
  [ "$prog" = "$cmd" ] || args=${cmd#* }
  case $prog in
    *.shader_test) args="$PIGLIT/tests/$prog $args" prog=shader_runner ;;
  esac
  if [ ! -x "$PIGLIT/bin/$prog" ] || { [ $prog = shader_runner ] && [ ! -f "${args%% *}" ]; }; then
    echo "FAIL: $cmd: no such test in $PIGLIT" >"$log"
    RC=2
    return 0
  fi
  local _
  for _ in 1 2 3; do
    set +e
    # shellcheck disable=SC2086 # the test's arguments are words
    timeout 120 "$@" "$PIGLIT/bin/$prog" $args -auto $fbo >"$log" 2>&1
    RC=$?
    set -e
    if grep -q "XOpenDisplay failed" "$log"; then
      echo "note: $cmd: Xvfb refused the connection: running it again" >&2
    elif [ $RC -ne 0 ] && [ $RC -ne 1 ] && [ -n "$(verdict "$log")" ] && mesa_exit_race "$log"; then
      echo "note: $cmd: exit $RC after its verdict (Mesa's exit race): running it again" >&2
    else
      return 0
    fi
  done
}

tests=${PIGLIT_TESTS:-$HERE/piglit-tests.txt}
n=0 checked=0
while IFS= read -r t; do
  case $t in ''|'#'*) continue ;; esac
  n=$((n + 1))
  run_test "$t" "$TMP/ref.log"
  ref=$(verdict "$TMP/ref.log") refrc=$RC
  if [ -z "$ref" ] || { [ $refrc -ne 0 ] && [ $refrc -ne 1 ]; }; then
    bad "$t without the layer: exit $refrc, verdict '${ref}'"; tail -3 "$TMP/ref.log" >&2; continue
  fi
  line="$t: $ref"
  for run in $runs; do
    mode=${run%:*} backend=${run#*:}
    tag=$mode
    [ $backend = auto ] || tag=$mode-$backend
    trace=$TMP/t.mtrace
    rm -f "$trace"
    run_test "$t" "$TMP/rec.log" "$MEMTRACK" record --quiet -o "$trace" --mode $mode --backend $backend --verify --
    got=$(verdict "$TMP/rec.log") rc=$RC
    # A test that never made a Vulkan device (it skips before drawing)
    # leaves no trace: record says so with 1.
    if [ $rc -eq 1 ] && [ $refrc -eq 0 ] && [ ! -e "$trace" ] && grep -q "no trace was written" "$TMP/rec.log"; then
      rc=0
    fi
    if [ "$got" != "$ref" ] || [ $rc -ne $refrc ]; then
      bad "$t ($tag): verdict '$got', exit $rc; without the layer '$ref', exit $refrc"
      tail -4 "$TMP/rec.log" >&2
      line="$line $tag=FAIL"
      continue
    fi
    if [ -e "$trace" ]; then
      set +e
      "$MEMTRACK" verify "$trace" >"$TMP/verify.log" 2>&1
      v=$?
      set -e
      h=$(sed -n 's/^hashes *\([0-9]*\) checked.*/\1/p' "$TMP/verify.log")
      checked=$((checked + ${h:-0}))
      if [ $v -ne 0 ] && [ $v -ne 4 ]; then
        bad "$t ($tag): verify exited $v"; grep -E "MISMATCH|LOST|result" "$TMP/verify.log" | head -5 >&2
        line="$line $tag=FAIL"
        continue
      fi
    fi
    line="$line $tag=ok"
  done
  echo "$line"
done <"$tests"
[ $n -gt 0 ] || { echo "FAIL: no test in $tests" >&2; exit 1; }
# Content hashes `verify` compared, over every run: none would mean that
# nothing zink mapped was ever captured.
[ $checked -gt 0 ] || bad "no run left a content hash to check"
[ $failures -eq 0 ] || { echo "piglit: $failures failures in $n tests" >&2; exit 1; }
echo "piglit: ok ($n tests, $checked content hashes checked)"
