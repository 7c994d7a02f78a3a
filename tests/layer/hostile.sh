#!/usr/bin/env bash
# memtrack-hostile under `memtrack record`: every legal behaviour a capture
# must survive, in every mode, with both tracking backends (uffd where the
# kernel has uffd-wp async), with the validation layer under ours where it is
# installed.
#
# For each run: the application's own checks pass (it compares what the GPU
# saw with what it wrote, and what it reads with what the GPU wrote), the
# validation layer stays silent, `memtrack verify` exits 0, and the trace
# holds the submits the application made. Special cases:
#   exec-child     the child's Vulkan program is not captured (no trace of its
#                  own, the parent's intact); with --follow-children it gets
#                  NAME.PID.mtrace, which verifies too
#   two-instances  five lifetimes' submits, all in the one trace
#   instances-threads  six lifetimes' submits (three threads, two rounds)
#   exit-after W   the process ends right after its last submit (_exit, exec,
#                  SIGTERM, SIGINT, a crash, abort, SIGKILL): the trace reads
#                  back with every submit, and verify says OK (0) or OK but
#                  incomplete (3), never FAILED; the crash's stderr says
#                  where it happened and that it was not tracked memory
#   device-lost    MEMTRACK_TEST_LOSE_DEVICE=2: the second wait reports the
#                  device lost; the markers and copy the application then
#                  reads through its mappings must be the device's
#   disk-full      the trace cannot be written (ulimit -f): the application
#                  is unaffected, record says why and exits 1
# Environment: HOSTILE_MODES, HOSTILE_BACKENDS, HOSTILE_BEHAVIOURS narrow the
# matrix; FRAMES sets the submits per behaviour; HOSTILE_JOBS runs that many
# (backend, mode) groups at once; HOSTILE_TABLE=FILE writes one line per run
# ("behaviour mode backend ok|FAIL|skip") for docs/layer.md's table.
# HOSTILE_LAYERS_BELOW=L1:L2 stacks those layers between ours and the
# validation layer (test_layer_hostile_gfxrecon: gfxreconstruct's capture
# layer, whose page guard protects the memory it hands up to ours).
. "$(dirname "$0")/common.sh"
if [ -n "${HOSTILE_LAYERS_BELOW:-}" ]; then
  case $HOSTILE_LAYERS_BELOW in
    *gfxreconstruct*)
      has_layer VkLayer_gfxreconstruct.json ||
        { echo "SKIPPED: gfxreconstruct's capture layer is not installed (scripts/deps.sh installs it)"; exit 77; } ;;
  esac
  export VK_INSTANCE_LAYERS="$HOSTILE_LAYERS_BELOW${VK_INSTANCE_LAYERS:+:$VK_INSTANCE_LAYERS}"
  # gfxreconstruct's capture, where it is one of them: beside each run's
  # trace (run, below), named after it.
  gfxr=1
fi
HOSTILE=$BUILD/bin/memtrack-hostile
frames=${FRAMES:-3}
modes=${HOSTILE_MODES:-auto guard shadow scan copy}
backends=${HOSTILE_BACKENDS:-signal uffd}
jobs=${HOSTILE_JOBS:-1}
uffd_ok=$("$BUILD/bin/mt_track_probe" uffd)
behaviours=${HOSTILE_BEHAVIOURS:-$("$HOSTILE" --list | awk '{print $1}' | grep -v '^exit-after$')}

# Under ThreadSanitizer, behaviours its runtime itself cannot run (each
# checked without the layer or documented by TSan) are skipped, with why:
#   fork-child            the forked child of a multi-threaded process hangs
#                         in exit() under TSan, without the layer too
#   sig-handler-writes,   TSan runs asynchronous handlers with every signal
#   sig-timer (signal)    blocked, so a tracked write there cannot reach the
#                         signal backend's handler (as in the track tests);
#                         the uffd backend runs them
#   exit-after crash      TSan reports the crash itself and aborts before
#                         the last words flush the trace
#   sig-timer-thread      TSan's runtime cannot run a SIGEV_THREAD function
#                         (glibc's own thread): it crashes without the layer
#   submit-race,          the application writes memory while another of its
#   fork-racing,          threads submits (or exits), so the capture reads
#   exit-racing           bytes being written: by design (those bytes are
#                         not the submit's; a later write faults again), but
#                         a race in TSan's eyes, and its reports slow the
#                         runs past the test's time limit
# Under ASan, fork-child's children end through _exit only: ASan's
# allocator is not fork-safe, and a child freeing memory in exit() could
# block on a lock another thread held at the fork (behave_process.c).
# Under any sanitizer:
#   sig-stack-overflow    the sanitizer's runtime owns SIGSEGV from before
#                         main, so the application's runtime handler is never
#                         installed, and the sanitizer reports the overflow
#                         itself (without the layer too)
tsan=0 san=0
case "${MT_SANITIZE:-}" in *thread*) tsan=1 ;; esac
[ -n "${MT_SANITIZE:-}" ] && san=1
tsan_skip() { # behaviour backend: true when the sanitizer's runtime cannot run it
  [ $san = 1 ] && [ "$1" = sig-stack-overflow ] && return 0
  [ $tsan = 1 ] || return 1
  case "$1/$2" in
    fork-child/*|sig-handler-writes/signal|sig-timer/signal|exit-crash/*) return 0 ;;
    sig-timer-thread/*|submit-race/*|fork-racing/*|exit-racing/*) return 0 ;;
  esac
  return 1
}
if [ $tsan = 1 ]; then
  echo "note: under TSan, skipped: fork-child, sig-handler-writes and sig-timer (signal backend), exit-after crash, sig-timer-thread, submit-race, fork-racing, exit-racing (see hostile.sh)"
fi
[ $san = 1 ] && echo "note: under a sanitizer, skipped: sig-stack-overflow (see hostile.sh)"

# Within one group (a subshell writing $out/*): record a failure.
bad() { echo "FAIL: $*" >>"$out/fail"; }

# run NAME MODE BACKEND [record options] -- app args: sets $rc, $log, $trace
run() {
  local name=$1 mode=$2 backend=$3; shift 3
  trace=$out/$name-$mode-$backend.mtrace
  log=$out/$name-$mode-$backend.log
  set +e
  if [ "${gfxr:-0}" = 1 ]; then export GFXRECON_CAPTURE_FILE=$out/$name-$mode-$backend.gfxr; fi
  "$MEMTRACK" record --quiet -o "$trace" --mode "$mode" --backend "$backend" --verify "$@" >"$log" 2>&1
  rc=$?
  set -e
}

# tidy NAME MODE BACKEND: a run that passed leaves its log only. Its traces
# (a child's too) and gfxreconstruct's captures take up to hundreds of MB
# each, a whole matrix gigabytes: on a shared disk that is how other tests
# meet a full file system. A failed run keeps everything.
tidy() { rm -f "$out/$1-$2-$3".*mtrace* "$out/$1-$2-$3"*.gfxr; }

submits_of() { "$MEMTRACK" info "$1" 2>/dev/null | sed -n 's/^submits *\([0-9]*\),.*/\1/p'; }
verify_rc() { set +e; "$MEMTRACK" verify "$1" >"$1.verify" 2>&1; local v=$?; set -e; echo $v; }
row() { echo "$1 $2 $3 $4" >>"$out/table"; }
nfail() { if [ -f "$out/fail" ]; then wc -l <"$out/fail"; else echo 0; fi; }

behaviour_group() { # backend mode
  local backend=$1 mode=$2
  for b in $behaviours; do
    local nfail_before
    if tsan_skip "$b" "$backend"; then row "$b" "$mode" "$backend" skip; continue; fi
    nfail_before=$(nfail)
    if [ "$b" = device-lost ]; then # the loss reported at the second wait
      MEMTRACK_TEST_LOSE_DEVICE=2 run "$b" "$mode" "$backend" -- "$HOSTILE" "$b" --frames "$frames"
      grep -q "reported lost at frame 2" "$log" || bad "$b ($mode, $backend): no loss reported at frame 2"
    else
      run "$b" "$mode" "$backend" -- "$HOSTILE" "$b" --frames "$frames"
    fi
    local what="$b ($mode, $backend)"
    if [ $rc -eq 77 ]; then # the machine lacks what the behaviour needs (it says what)
      row "$b" "$mode" "$backend" skip
      continue
    elif [ $rc -ne 0 ]; then
      bad "$what: record exited $rc: $(grep -v '^memtrack: trace ' "$log" | tail -2 | tr '\n' ' ')"
    else
      if grep -qE "Validation (Error|Warning)|VUID-" "$log"; then bad "$what: validation messages"; fi
      if grep -qE "ThreadSanitizer|AddressSanitizer|runtime error" "$log"; then bad "$what: sanitizer report"; fi
      local v n want=
      v=$(verify_rc "$trace")
      [ "$v" = 0 ] || bad "$what: verify exited $v: $(grep -E 'LOST|MISMATCH|result' "$trace.verify" | head -2 | tr '\n' ' ')"
      n=$(submits_of "$trace")
      case $b in
        two-instances) want=$((frames * 5)) ;;
        instances-threads) want=$((frames * 6)) ;;
        heap-small) want=$((frames * 20)) ;;
        exec-child) want=$((frames + 1)) ;;
      esac
      [ -z "$want" ] || [ "$n" = "$want" ] || bad "$what: $n submits in the trace, expected $want"
      if [ "$b" = exec-child ] && ls "$out"/exec-child-$mode-$backend.*.mtrace >/dev/null 2>&1; then
        bad "$what: the exec'd child wrote a trace without --follow-children"
      fi
      # Without the memory budget the references take it over its limit
      # (killed: 137); the trace says where the budget acted.
      if [ "${b#memory-limit}" != "$b" ] &&
         ! "$MEMTRACK" info "$trace" 2>/dev/null | grep -qE "reference copy back|gets no reference copy"; then
        bad "$what: the trace does not say that the memory budget acted"
      fi
    fi
    if [ "$(nfail)" = "$nfail_before" ]; then row "$b" "$mode" "$backend" ok; tidy "$b" "$mode" "$backend"
    else row "$b" "$mode" "$backend" FAIL; fi
  done
}

exit_group() { # backend mode
  local backend=$1 mode=$2
  for way in _exit exec sigterm sigint crash abort kill; do
    local nfail_before
    if tsan_skip "exit-$way" "$backend"; then row "exit-$way" "$mode" "$backend" skip; continue; fi
    nfail_before=$(nfail)
    run "exit-$way" "$mode" "$backend" -- "$HOSTILE" exit-after "$way" --frames "$frames"
    local what="exit-after $way ($mode, $backend)" n v
    grep -q "submits done" "$log" || bad "$what: the application failed before its end"
    # The wild write is reported, where it happened and that it is not
    # memory memtrack tracks (mt_track_set_fault_report). A sanitizer's
    # runtime takes the fault itself (its handler is next in the chain).
    if [ $way = crash ] && [ $san = 0 ] && ! grep -q "^memtrack: the process dies of SIGSEGV (address not mapped) at address 0x8, outside any memory memtrack tracks; instruction at 0x[0-9a-f]* in memtrack-hostile+0x" "$log"; then
      bad "$what: no report of the fault"
    fi
    if [ -f "$trace" ]; then
      n=$(submits_of "$trace")
      [ "$n" = "$frames" ] || bad "$what: the trace reads back $n submits, expected $frames"
      v=$(verify_rc "$trace")
      case $v in 0|3) ;; *) bad "$what: verify exited $v" ;; esac
    else
      bad "$what: no trace"
    fi
    if [ "$(nfail)" = "$nfail_before" ]; then row "exit-$way" "$mode" "$backend" ok; tidy "exit-$way" "$mode" "$backend"
    else row "exit-$way" "$mode" "$backend" FAIL; fi
  done
}

disk_full_group() { # backend mode
  local backend=$1 mode=$2 rc
  set +e
  if [ "${gfxr:-0}" = 1 ]; then export GFXRECON_CAPTURE_FILE=$out/full-$mode.gfxr; fi
  (ulimit -f 64; trap '' XFSZ; exec "$MEMTRACK" record --quiet -o "$out/full-$mode.mtrace" --mode "$mode" \
     --backend "$backend" --verify -- "$HOSTILE" baseline --frames 12) >"$out/full-$mode.log" 2>&1
  rc=$?
  set -e
  local nfail_before
  nfail_before=$(nfail)
  grep -q "baseline: ok" "$out/full-$mode.log" || bad "disk full ($mode, $backend): the application failed"
  [ $rc -eq 1 ] || bad "disk full ($mode, $backend): record exited $rc, not 1"
  grep -q "writing the trace failed" "$out/full-$mode.log" || bad "disk full ($mode, $backend): no message about the trace"
  if [ "$(nfail)" = "$nfail_before" ]; then row disk-full "$mode" "$backend" ok; rm -f "$out/full-$mode".*mtrace* "$out/full-$mode"*.gfxr
  else row disk-full "$mode" "$backend" FAIL; fi
}

follow_group() { # backend
  local backend=$1 child
  run follow auto "$backend" --follow-children -- "$HOSTILE" exec-child --frames "$frames"
  [ $rc -eq 0 ] || bad "exec-child --follow-children ($backend): record exited $rc"
  child=$(ls "$out"/follow-auto-$backend.*.mtrace 2>/dev/null | head -1)
  if [ -z "$child" ]; then bad "exec-child --follow-children ($backend): no child trace"
  else
    [ "$(verify_rc "$child")" = 0 ] || bad "exec-child --follow-children ($backend): child trace does not verify"
    [ "$(submits_of "$child")" = "$frames" ] || bad "exec-child --follow-children ($backend): child trace has $(submits_of "$child") submits"
  fi
  [ "$(verify_rc "$trace")" = 0 ] || bad "exec-child --follow-children ($backend): parent trace does not verify"
}

# One directory per group; groups run $jobs at a time.
groups=()
for backend in $backends; do
  if [ "$backend" = uffd ] && [ "$uffd_ok" != 1 ]; then
    echo "uffd backend: SKIPPED (this kernel has no uffd-wp async; the signal backend ran)"
    continue
  fi
  for mode in $modes; do groups+=("behaviour_group $backend $mode" "exit_group $backend $mode" "disk_full_group $backend $mode"); done
  groups+=("follow_group $backend")
done
running=0
for g in "${groups[@]}"; do
  out=$TMP/$(echo "$g" | tr ' ' '_')
  mkdir -p "$out"
  (set -e; $g) &
  running=$((running + 1))
  if [ $running -ge "$jobs" ]; then wait -n || true; running=$((running - 1)); fi
done
wait
cat "$TMP"/*/table 2>/dev/null | sort >"$TMP/table" || true
[ -z "${HOSTILE_TABLE:-}" ] || cp "$TMP/table" "$HOSTILE_TABLE"
awk '$4 != "skip" {k=$3"/"$2; n[k]++; if ($4=="ok") ok[k]++} END {for (k in n) printf "  %-14s %d/%d ok\n", k, ok[k], n[k]}' "$TMP/table" | sort
failures=$(cat "$TMP"/*/fail 2>/dev/null | wc -l || true)
if [ "$failures" -ne 0 ]; then cat "$TMP"/*/fail >&2; echo "hostile: $failures failures" >&2; exit 1; fi
echo "hostile: ok"
