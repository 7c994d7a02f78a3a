#!/usr/bin/env bash
# memtrack-hostile under `memtrack record`: every legal behaviour a capture
# must survive, in every mode, with both tracking backends (uffd where the
# kernel has uffd-wp async), with the validation layer under ours.
#
# For each run: the application's own checks pass (it compares what the GPU
# saw with what it wrote, and what it reads with what the GPU wrote), the
# validation layer stays silent, `memtrack verify` exits 0, and the trace
# holds the submits the application made. Special cases:
#   exec-child     the child's Vulkan program is not captured (no trace of its
#                  own, the parent's intact); with --follow-children it gets
#                  NAME.PID.mtrace, which verifies too
#   two-instances  five lifetimes' submits, all in the one trace
#   exit-after W   the process ends right after its last submit (_exit, exec,
#                  SIGTERM, SIGINT, a crash, abort, SIGKILL): the trace reads
#                  back with every submit, and verify says OK (0) or OK but
#                  incomplete (3), never FAILED
#   disk-full      the trace cannot be written (ulimit -f): the application
#                  is unaffected, record says why and exits 1
# Environment: HOSTILE_MODES, HOSTILE_BACKENDS, HOSTILE_BEHAVIOURS narrow the
# matrix; FRAMES sets the submits per behaviour.
. "$(dirname "$0")/common.sh"
HOSTILE=$BUILD/bin/memtrack-hostile
frames=${FRAMES:-3}
modes=${HOSTILE_MODES:-auto guard shadow scan copy}
backends=${HOSTILE_BACKENDS:-signal uffd}
uffd_ok=$("$BUILD/bin/mt_track_probe" uffd)
behaviours=${HOSTILE_BEHAVIOURS:-$("$HOSTILE" --list | awk '{print $1}' | grep -v '^exit-after$')}
failures=0
bad() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# run NAME MODE BACKEND [record options] -- app args: sets $rc, $log, $trace
run() {
  local name=$1 mode=$2 backend=$3; shift 3
  trace=$TMP/$name-$mode-$backend.mtrace
  log=$TMP/$name-$mode-$backend.log
  set +e
  "$MEMTRACK" record --quiet -o "$trace" --mode "$mode" --backend "$backend" --verify "$@" >"$log" 2>&1
  rc=$?
  set -e
}

submits_of() { "$MEMTRACK" info "$1" 2>/dev/null | sed -n 's/^submits *\([0-9]*\),.*/\1/p'; }

verify_rc() { set +e; "$MEMTRACK" verify "$1" >"$1.verify" 2>&1; local v=$?; set -e; echo $v; }

for backend in $backends; do
  if [ "$backend" = uffd ] && [ "$uffd_ok" != 1 ]; then
    echo "uffd backend: SKIPPED (this kernel has no uffd-wp async; the signal backend ran)"
    continue
  fi
  for mode in $modes; do
    line="$backend/$mode:"
    for b in $behaviours; do
      run "$b" "$mode" "$backend" -- "$HOSTILE" "$b" --frames "$frames"
      what="$b ($mode, $backend)"
      if [ $rc -ne 0 ]; then bad "$what: record exited $rc"; tail -5 "$log" >&2; line="$line $b=FAIL"; continue; fi
      if grep -qE "Validation (Error|Warning)|VUID-" "$log"; then bad "$what: validation messages"; grep -E "VUID-" "$log" | head -3 >&2; fi
      if grep -qE "ThreadSanitizer|AddressSanitizer|runtime error" "$log"; then bad "$what: sanitizer report"; fi
      v=$(verify_rc "$trace")
      [ "$v" = 0 ] || { bad "$what: verify exited $v"; cat "$trace.verify" >&2; }
      n=$(submits_of "$trace")
      case $b in
        two-instances) want=$((frames * 5)) ;;
        heap-small) want=$((frames * 20)) ;;
        exec-child) want=$((frames + 1)) ;;
        *) want= ;;
      esac
      [ -z "$want" ] || [ "$n" = "$want" ] || bad "$what: $n submits in the trace, expected $want"
      if [ "$b" = exec-child ] && ls "$TMP"/exec-child-$mode-$backend.*.mtrace >/dev/null 2>&1; then
        bad "$what: the exec'd child wrote a trace without --follow-children"
      fi
      line="$line $b=ok"
    done
    echo "$line"
  done

  # A child followed: its own trace, which verifies; the parent's intact.
  run follow auto "$backend" --follow-children -- "$HOSTILE" exec-child --frames "$frames"
  [ $rc -eq 0 ] || bad "exec-child --follow-children ($backend): record exited $rc"
  child=$(ls "$TMP"/follow-auto-$backend.*.mtrace 2>/dev/null | head -1)
  if [ -z "$child" ]; then bad "exec-child --follow-children ($backend): no child trace"
  else
    [ "$(verify_rc "$child")" = 0 ] || bad "exec-child --follow-children ($backend): child trace does not verify"
    [ "$(submits_of "$child")" = "$frames" ] || bad "exec-child --follow-children ($backend): child trace has $(submits_of "$child") submits"
  fi
  [ "$(verify_rc "$trace")" = 0 ] || bad "exec-child --follow-children ($backend): parent trace does not verify"

  # Ends that run no exit handler, right after the last submit.
  line="$backend exits:"
  for mode in $modes; do
    for way in _exit exec sigterm sigint crash abort kill; do
      run "exit-$way" "$mode" "$backend" -- "$HOSTILE" exit-after "$way" --frames "$frames"
      what="exit-after $way ($mode, $backend)"
      grep -q "submits done" "$log" || { bad "$what: the application failed before its end"; tail -3 "$log" >&2; }
      [ -f "$trace" ] || { bad "$what: no trace"; continue; }
      n=$(submits_of "$trace")
      [ "$n" = "$frames" ] || bad "$what: the trace reads back $n submits, expected $frames"
      v=$(verify_rc "$trace")
      case $v in 0|3) ;; *) bad "$what: verify exited $v"; cat "$trace.verify" >&2 ;; esac
    done
    line="$line $mode=done"
  done
  echo "$line"

  # Disk full (the file size limit): the application does not notice.
  for mode in $modes; do
    set +e
    (ulimit -f 64; trap '' XFSZ; exec "$MEMTRACK" record --quiet -o "$TMP/full.mtrace" --mode "$mode" \
       --backend "$backend" --verify -- "$HOSTILE" baseline --frames 12) >"$TMP/full.log" 2>&1
    rc=$?
    set -e
    grep -q "baseline: ok" "$TMP/full.log" || { bad "disk full ($mode, $backend): the application failed"; tail -5 "$TMP/full.log" >&2; }
    [ $rc -eq 1 ] || bad "disk full ($mode, $backend): record exited $rc, not 1"
    grep -q "writing the trace failed" "$TMP/full.log" || bad "disk full ($mode, $backend): no message about the trace"
  done
  echo "$backend disk full: done"
done
[ $failures -eq 0 ] || { echo "hostile: $failures failures" >&2; exit 1; }
echo "hostile: ok"
