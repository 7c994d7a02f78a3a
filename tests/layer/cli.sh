#!/usr/bin/env bash
# CLI contract: help and version work; unknown commands and bad flags print
# usage to stderr and exit 2; bad files give a clear error and exit 1.
. "$(dirname "$0")/common.sh"
"$MEMTRACK" --help | grep -q "record" || fail "--help lists no record"
"$MEMTRACK" --version | grep -q "memtrack 0\." || fail "--version"
expect2() { set +e; "$@" >"$TMP/o" 2>"$TMP/e"; rc=$?; set -e; [ $rc -eq 2 ] || fail "'$*' exited $rc, not 2"; grep -q usage "$TMP/e" || fail "'$*' printed no usage on stderr"; }
expect2 "$MEMTRACK"
expect2 "$MEMTRACK" frobnicate
expect2 "$MEMTRACK" --frobnicate
expect2 "$MEMTRACK" bench
expect2 "$MEMTRACK" bench track --fast
expect2 "$MEMTRACK" record --mode warp -- true
expect2 "$MEMTRACK" record
expect2 "$MEMTRACK" info
expect2 "$MEMTRACK" verify
expect2 "$MEMTRACK" dump x.mtrace --submit 1
expect2 "$MEMTRACK" dump x.mtrace --submit one --memory 1 -o y
for c in record info verify dump report bench check; do "$MEMTRACK" $c --help | grep -q "usage: memtrack $c" || fail "$c --help"; done
head -c 3000 /dev/urandom >"$TMP/junk"
set +e
"$MEMTRACK" info "$TMP/junk" 2>"$TMP/e"; rc=$?
set -e
[ $rc -eq 1 ] && grep -q "memtrack: " "$TMP/e" || fail "info on junk: rc=$rc"
set +e; "$MEMTRACK" verify /nonexistent.mtrace 2>"$TMP/e"; rc=$?; set -e
[ $rc -eq 1 ] && grep -q "No such file" "$TMP/e" || fail "verify on a missing file: rc=$rc"

# record's output path: never a crash, a hang, or a stale file reported as the trace.
rec1() { set +e; timeout 60 "$MEMTRACK" record --quiet -o "$1" -- true >"$TMP/o" 2>"$TMP/e"; rc=$?; set -e; }
rec1 "$TMP"; [ $rc -eq 1 ] && grep -q "is a directory" "$TMP/e" || fail "record -o DIR: rc=$rc"
rec1 /dev/full; [ $rc -eq 1 ] && grep -q "not a regular file" "$TMP/e" || fail "record -o /dev/full: rc=$rc"
mkfifo "$TMP/fifo"; rec1 "$TMP/fifo"; [ $rc -eq 1 ] && grep -q "not a regular file" "$TMP/e" || fail "record -o FIFO: rc=$rc"
rec1 "$TMP/no/such/dir/t.mtrace"; [ $rc -eq 1 ] && grep -q "cannot create" "$TMP/e" || fail "record -o in a missing directory: rc=$rc"
rec1 "$TMP/$(printf 'a%.0s' $(seq 8000))"; [ $rc -eq 1 ] && grep -q "cannot create" "$TMP/e" || fail "record -o with an 8000-character path: rc=$rc"
echo stale >"$TMP/stale.mtrace"; rec1 "$TMP/stale.mtrace"
[ $rc -eq 1 ] && grep -q "no trace was written" "$TMP/e" || fail "record of a program without Vulkan: rc=$rc"
[ ! -e "$TMP/stale.mtrace" ] || fail "record left a stale file where the trace should be"
set +e; "$MEMTRACK" record -o >"$TMP/o" 2>"$TMP/e"; rc=$?; set -e
[ $rc -eq 2 ] && grep -q "needs a value" "$TMP/e" || fail "record -o without a value: rc=$rc"
expect2 "$MEMTRACK" record --backend warp -- true
# dump says which of submit and memory is missing.
"$MEMTRACK" record --quiet -o "$TMP/s.mtrace" -- "$SAMPLE" --workload sparse --frames 2 >/dev/null 2>&1 || fail "sample"
set +e; "$MEMTRACK" dump "$TMP/s.mtrace" --submit 99 --memory 1 -o "$TMP/d" 2>"$TMP/e"; rc=$?; set -e
[ $rc -eq 1 ] && grep -q "no submit 99: the trace has 2 submits" "$TMP/e" || fail "dump of a missing submit: rc=$rc"
set +e; "$MEMTRACK" dump "$TMP/s.mtrace" --submit 1 --memory 999 -o "$TMP/d" 2>"$TMP/e"; rc=$?; set -e
[ $rc -eq 1 ] && grep -q "memory 999 does not exist at submit 1" "$TMP/e" || fail "dump of a missing memory: rc=$rc"
# record returns when every process writing a trace has finished it, not
# when the program it started ends: a launcher that backgrounds the
# application and exits once the application has written some submits (the
# trace past 100 KB), and one killed while the application runs (the
# SIGTERM record receives reaches the application, an orphan by then).
bg_frames=400
[ -n "${MT_SANITIZE:-}" ] && bg_frames=40 # each frame costs ~0.5 s under TSan
set +e
timeout 300 "$MEMTRACK" record --verify -o "$TMP/bg.mtrace" -- \
  sh -c "\"$SAMPLE\" --workload sparse --frames $bg_frames >/dev/null 2>&1 &
         while [ \$(stat -c %s \"$TMP/bg.mtrace\" 2>/dev/null || echo 0) -le 100000 ]; do sleep 0.02; done" \
  >"$TMP/o" 2>"$TMP/e"
rc=$?
set -e
[ $rc -eq 0 ] && grep -q "waiting for process" "$TMP/e" || { cat "$TMP/e"; fail "record of a backgrounded application: rc=$rc"; }
"$MEMTRACK" verify "$TMP/bg.mtrace" >"$TMP/v" 2>&1 || { cat "$TMP/v"; fail "verify of a backgrounded application's trace"; }
grep -q "^result *OK: every submit matches" "$TMP/v" && grep -q "^submits *$bg_frames replayed" "$TMP/v" ||
  { cat "$TMP/v"; fail "the backgrounded application's trace is not complete"; }
"$MEMTRACK" record --verify -o "$TMP/kill.mtrace" -- \
  sh -c "\"$SAMPLE\" --workload sparse --frames 1000000 >/dev/null 2>&1 & wait" >"$TMP/o" 2>"$TMP/e" &
rec=$!
# Until the application has written some submits (the trace grows past 100 KB).
for _ in $(seq 600); do [ "$(stat -c %s "$TMP/kill.mtrace" 2>/dev/null || echo 0)" -gt 100000 ] && break; sleep 0.1; done
kill -TERM $rec
set +e
timeout 60 tail --pid=$rec -f /dev/null
rc=$?
wait $rec
set -e
[ $rc -eq 0 ] || fail "record killed with its launcher: did not return (the application kept running)"
pgrep -f "memtrack-sample --workload sparse --frames 1000000" >/dev/null && { pkill -f "frames 1000000"; fail "the orphaned application outlived record's SIGTERM"; }
"$MEMTRACK" verify "$TMP/kill.mtrace" >"$TMP/v" 2>&1 || { cat "$TMP/v"; fail "verify of a killed application's trace"; }
grep -q "^result *OK: every submit matches" "$TMP/v" || { cat "$TMP/v"; fail "the killed application's trace"; }
echo "cli: ok"
